"""Meal plan: days x meals, filled with dishes."""

from ace_gym.domains.spec import CategoricalAttribute, Domain, GlobalRule, NumericAttribute, SlotRule

DOMAIN = Domain(
    name="meal",
    id_key="dish_id",
    id_prefix="D",
    item_label="dish",
    item_plural="dishes",
    tool_title="meal item",
    task_title="meal planning",
    intro="meal planning",
    grid_text=(
        "This meal planning task has {rows} planning days as rows and {cols} meal slots to fill per day as columns."
    ),
    attributes=(
        NumericAttribute("calories", 150, 900),
        NumericAttribute("protein", 5, 60),
        NumericAttribute("price", 5, 35),
        CategoricalAttribute("cuisine", ("asian", "mediterranean", "american", "mexican", "italian", "fusion")),
        CategoricalAttribute(
            "chef",
            (
                "Chef Baker",
                "Chef Carter",
                "Chef Gomez",
                "Chef Lin",
                "Chef Morgan",
                "Chef Patel",
                "Chef Rivera",
                "Chef Rossi",
            ),
        ),
        NumericAttribute("spiciness", 1, 5),
    ),
    prompt_attributes=("name", "calories", "protein", "price", "cuisine", "chef", "spiciness"),
    slot_rules=(
        SlotRule("max_calories", "calories", "max", (350, 500, 650, 800, 900)),
        SlotRule("min_protein", "protein", "min", (5, 15, 25, 35)),
        SlotRule("max_price", "price", "max", (10, 15, 20, 28, 35)),
    ),
    global_rules=(
        GlobalRule("weekly_calories_max", "sum_max", "calories", slack=700, cap=900),
        GlobalRule("weekly_protein_min", "sum_min", "protein", slack=100, floor=0),
        GlobalRule("same_cuisine_max", "repeat_max", "cuisine"),
        GlobalRule("same_chef_max", "repeat_max", "chef"),
        GlobalRule("weekly_price_max", "sum_max", "price", slack=90, cap=35),
        GlobalRule("weekly_spiciness_max", "sum_max", "spiciness", slack=18, cap=5),
    ),
    name_attribute="cuisine",
    name_phrases={
        "asian": ("Curry Dish", "Dumpling Set", "Noodle Bowl", "Rice Plate"),
        "mediterranean": ("Falafel Box", "Grill Platter", "Salad Plate", "Wrap Meal"),
        "american": ("Burger Plate", "Roast Tray", "Sandwich Box", "Steak Meal"),
        "mexican": ("Burrito Bowl", "Quesadilla Set", "Salsa Meal", "Taco Plate"),
        "italian": ("Lasagna Tray", "Pasta Dish", "Pizza Slice", "Risotto Plate"),
        "fusion": ("Chef Special", "Mix Grill", "Power Bowl", "Seasonal Plate"),
    },
)
