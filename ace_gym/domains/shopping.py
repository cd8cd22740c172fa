"""Grocery shopping: days x item slots, filled with products."""

from ace_gym.domains.spec import CategoricalAttribute, Domain, GlobalRule, NumericAttribute, SlotRule

DOMAIN = Domain(
    name="shopping",
    id_key="product_id",
    id_prefix="P",
    item_label="product",
    item_plural="products",
    tool_title="shopping item",
    task_title="grocery shopping",
    intro="shopping plan construction",
    grid_text=(
        "This grocery shopping plan has {rows} shopping days as rows and {cols} item slots to fill per day as columns."
    ),
    attributes=(
        CategoricalAttribute("category", ("produce", "dairy", "snack", "protein", "grain", "beverage")),
        NumericAttribute("price", 2, 25),
        NumericAttribute("calories", 50, 800),
        NumericAttribute("protein", 0, 40),
        CategoricalAttribute(
            "brand",
            (
                "DailyChoice",
                "FreshFarm",
                "GreenLeaf",
                "HomeHarvest",
                "NutriBest",
                "PeakMarket",
                "PrimeSelect",
                "UrbanTaste",
            ),
        ),
        NumericAttribute("weight", 200, 1500),
    ),
    prompt_attributes=("name", "category", "price", "calories", "protein", "brand", "weight"),
    slot_rules=(
        SlotRule("max_price", "price", "max", (8, 12, 16, 20, 25)),
        SlotRule("min_calories", "calories", "min", (50, 150, 250, 350)),
        SlotRule("min_protein", "protein", "min", (0, 10, 20, 30)),
    ),
    global_rules=(
        GlobalRule("weekly_budget_max", "sum_max", "price", slack=60, cap=25),
        GlobalRule("weekly_calories_min", "sum_min", "calories", slack=600, floor=0),
        GlobalRule("weekly_protein_min", "sum_min", "protein", slack=90, floor=0),
        GlobalRule("same_brand_max", "repeat_max", "brand"),
        GlobalRule("weekly_weight_max", "sum_max", "weight", slack=3000, cap=1500),
        GlobalRule("same_category_max", "repeat_max", "category"),
    ),
    name_attribute="category",
    name_phrases={
        "produce": ("Apples", "Bananas", "Berries", "Greens", "Tomatoes"),
        "dairy": ("Butter", "Cheese", "Cream", "Milk", "Yogurt"),
        "snack": ("Bars", "Chips", "Cookies", "Crackers", "Nuts"),
        "protein": ("Beans", "Chicken", "Eggs", "Fish", "Tofu"),
        "grain": ("Bread", "Oats", "Pasta", "Quinoa", "Rice"),
        "beverage": ("Coffee", "Juice", "Smoothie", "Tea", "Water"),
    },
)
