"""PC builds: configurations x component slots, filled with components."""

from ace_gym.domains.spec import CategoricalAttribute, Domain, GlobalRule, NumericAttribute, SlotRule

DOMAIN = Domain(
    name="pc_build",
    id_key="component_id",
    id_prefix="PC",
    item_label="component",
    item_plural="components",
    tool_title="PC build item",
    task_title="PC build configuration",
    intro="PC build configuration",
    grid_text=(
        "This PC build task has {rows} build configurations as rows and {cols} component slots "
        "within each configuration as columns."
    ),
    attributes=(
        CategoricalAttribute("category", ("cpu", "gpu", "ram", "storage", "motherboard", "cooling")),
        NumericAttribute("price", 50, 1500),
        NumericAttribute("performance", 10, 100),
        NumericAttribute("power", 20, 450),
        CategoricalAttribute(
            "brand",
            (
                "ApexCore",
                "IronGrid",
                "NovaTech",
                "PixelWare",
                "QuantumEdge",
                "SkyChip",
                "TitanBit",
                "VoltForge",
            ),
        ),
        NumericAttribute("compatibility", 60, 100),
    ),
    prompt_attributes=("name", "category", "price", "performance", "power", "brand", "compatibility"),
    slot_rules=(
        SlotRule("max_price", "price", "max", (220, 400, 650, 900, 1500)),
        SlotRule("min_performance", "performance", "min", (20, 40, 60, 75)),
        SlotRule("max_power", "power", "max", (90, 150, 220, 320, 450)),
    ),
    global_rules=(
        GlobalRule("total_budget_max", "sum_max", "price", slack=1200, cap=1500),
        GlobalRule("total_power_max", "sum_max", "power", slack=500, cap=450),
        GlobalRule("same_brand_max", "repeat_max", "brand"),
        GlobalRule("same_category_max", "repeat_max", "category"),
        GlobalRule("high_performance_min", "count_min_threshold", "performance", slack=2, threshold=75),
        GlobalRule("total_compatibility_min", "sum_min", "compatibility", slack=180, floor=60),
    ),
    name_attribute="category",
    name_phrases={
        "cpu": ("Compute Chip", "Gaming CPU", "Performance CPU", "Processor"),
        "gpu": ("Creator GPU", "Gaming GPU", "Graphics Card", "Render GPU"),
        "ram": ("DDR Module", "Low Latency RAM", "Memory Kit", "Performance RAM"),
        "storage": ("Archive Drive", "NVMe Drive", "Performance Storage", "SSD Drive"),
        "motherboard": ("ATX Board", "Compact Board", "Mainboard", "Performance Board"),
        "cooling": ("ARGB Cooler", "Air Cooler", "Liquid Cooler", "Silent Cooler"),
    },
)
