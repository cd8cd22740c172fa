"""Travel itinerary: days x activity slots, filled with activities."""

from ace_gym.domains.spec import CategoricalAttribute, Domain, GlobalRule, NumericAttribute, SlotRule

DOMAIN = Domain(
    name="travel",
    id_key="activity_id",
    id_prefix="A",
    item_label="activity",
    item_plural="activities",
    tool_title="travel item",
    task_title="travel itinerary",
    intro="travel itinerary construction",
    grid_text="This travel itinerary has {rows} travel days as rows and {cols} activity slots per day as columns.",
    attributes=(
        CategoricalAttribute("category", ("museum", "outdoor", "food", "show", "landmark", "market")),
        NumericAttribute("cost", 10, 200),
        NumericAttribute("duration", 1, 6),
        NumericAttribute("crowd_level", 1, 5),
        CategoricalAttribute(
            "location",
            (
                "City Center",
                "Downtown",
                "Garden Area",
                "Harbor",
                "Hill District",
                "Museum Quarter",
                "Old Town",
                "Riverside",
            ),
        ),
        NumericAttribute("rating", 1, 5),
    ),
    prompt_attributes=("name", "category", "cost", "duration", "crowd_level", "location", "rating"),
    slot_rules=(
        SlotRule("max_cost", "cost", "max", (60, 90, 120, 160, 200)),
        SlotRule("max_duration", "duration", "max", (2, 3, 4, 5, 6)),
        SlotRule("max_crowd", "crowd_level", "max", (2, 3, 4, 5)),
    ),
    global_rules=(
        GlobalRule("total_budget_max", "sum_max", "cost", slack=300, cap=200),
        GlobalRule("museum_min", "count_min", "category", slack=1, value="museum"),
        GlobalRule("outdoor_min", "count_min", "category", slack=1, value="outdoor"),
        GlobalRule("location_repeat_max", "repeat_max", "location"),
        GlobalRule("daily_duration_max", "max_row_sum", "duration", slack=2, cap=6),
        GlobalRule("rating_total_min", "sum_min", "rating", slack=10, floor=1),
    ),
    name_attribute="category",
    name_phrases={
        "museum": ("Art Museum", "Gallery Tour", "History Hall", "Science Center"),
        "outdoor": ("Beach Visit", "Boat Ride", "Mountain Trail", "Park Walk"),
        "food": ("Cafe Visit", "Dinner Cruise", "Street Food", "Tasting Tour"),
        "show": ("Concert", "Dance Show", "Jazz Night", "Theater"),
        "landmark": ("Bridge Tour", "Castle Stop", "Monument Walk", "Tower Visit"),
        "market": ("Bazaar", "Craft Market", "Farmers Market", "Night Market"),
    },
)
