"""Course timetable: days x class periods, filled with courses."""

from ace_gym.domains.spec import CategoricalAttribute, Domain, GlobalRule, NumericAttribute, SlotRule

DOMAIN = Domain(
    name="course",
    id_key="course_id",
    id_prefix="C",
    item_label="course",
    item_plural="courses",
    tool_title="course",
    task_title="course scheduling",
    intro="course schedule construction",
    grid_text=(
        "This course scheduling plan has {rows} scheduling days as rows and {cols} class time slots per day as columns."
    ),
    attributes=(
        CategoricalAttribute("category", ("math", "cs", "core", "elective", "lab", "seminar")),
        NumericAttribute("difficulty", 1, 5),
        NumericAttribute("credits", 1, 4),
        NumericAttribute("price", 100, 500),
        CategoricalAttribute(
            "teacher",
            (
                "Alice Johnson",
                "Bob Smith",
                "Carol Davis",
                "Daniel Lee",
                "Eva Brown",
                "Frank Wilson",
                "Grace Taylor",
                "Henry Moore",
                "Ivy Thomas",
                "Jack Martin",
                "Karen White",
                "Leo Harris",
                "Mia Clark",
                "Noah Walker",
                "Olivia Hall",
                "Peter Young",
            ),
        ),
        NumericAttribute("workload", 1, 8),
    ),
    prompt_attributes=("name", "category", "difficulty", "credits", "price", "teacher", "workload"),
    slot_rules=(
        SlotRule("max_difficulty", "difficulty", "max", (3, 4, 5)),
        SlotRule("min_credits", "credits", "min", (1, 2, 3)),
        SlotRule("max_price", "price", "max", (280, 340, 400, 460, 500)),
    ),
    global_rules=(
        GlobalRule("total_credits_min", "sum_min", "credits", slack=8, floor=1),
        GlobalRule("total_price_max", "sum_max", "price", slack=1500, cap=500),
        GlobalRule("same_teacher_week_max", "repeat_max", "teacher"),
        GlobalRule("same_category_week_max", "repeat_max", "category"),
        GlobalRule("total_workload_max", "sum_max", "workload", slack=20, cap=8),
    ),
    name_attribute="category",
    name_phrases={
        "math": ("Algebra", "Calculus", "Geometry", "Optimization", "Statistics"),
        "cs": ("AI", "Algorithms", "Databases", "Networks", "Systems"),
        "core": ("Analysis", "Foundations", "Methods", "Practice", "Theory"),
        "elective": ("Business", "Design", "Innovation", "Media", "Writing"),
        "lab": ("Experiments", "Prototyping", "Simulation", "Studio", "Workshop"),
        "seminar": ("Colloquium", "Discussion", "Perspectives", "Research", "Topics"),
    },
)
