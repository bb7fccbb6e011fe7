"""The benchmark's workloads: a library's facts and claims about them, written for the
benchmark (no data files), some claims supported and some not."""

from __future__ import annotations

# ~350 tokens of context, and claims about it: some supported, some not
SINGLE_CONTEXT = [
    "The Aurora Regional Library opened in March 1998 in the town of Fenwick, on the site of a former textile mill.",
    "The building was designed by the architect Helena Marsh and has three floors with a total area of about 4,200 square metres.",
    "At opening it held 85,000 books; by 2020 the collection had grown to roughly 240,000 items, including 30,000 audiobooks and films.",
    "The library is open from 9 a.m. to 8 p.m. on weekdays and from 10 a.m. to 4 p.m. on Saturdays; it is closed on Sundays.",
    "In 2011 a solar roof was installed, which supplies about 40 percent of the building's electricity.",
    "The children's wing was added in 2005 and was funded by a donation of 1.2 million euros from the Fenwick Savings Cooperative.",
    "The library employs 46 staff, of whom 12 work part-time, and it is run by the Fenwick District Council.",
    "Each year it hosts a poetry festival in October, which attracted about 3,000 visitors in 2019.",
    "Membership is free for residents of the district; visitors from elsewhere pay an annual fee of 15 euros.",
    "A mobile library van serves eleven villages in the district twice a month.",
    "In 2016 the library began lending musical instruments, starting with 60 guitars, keyboards and violins.",
    "The reading room on the top floor overlooks the river Wend and seats 120 people.",
]
SINGLE_CLAIMS = [
    "The library opened in March 1998.",
    "The library opened in 1989.",
    "It stands on the site of a former textile mill.",
    "It was built on the site of an old railway station.",
    "Helena Marsh designed the building.",
    "The building has five floors.",
    "Its floor area is roughly 4,000 square metres.",
    "The collection held 85,000 books at opening.",
    "By 2020 the collection had about 240,000 items.",
    "The library holds over a million books.",
    "It is open until 8 p.m. on weekdays.",
    "It is open on Sundays.",
    "A solar roof was installed in 2011.",
    "The solar roof supplies all of the building's electricity.",
    "The children's wing was added in 2005.",
    "The children's wing cost 5 million euros.",
    "The library has 46 employees.",
    "All staff work full-time.",
    "The Fenwick District Council runs the library.",
    "The poetry festival takes place every October.",
    "The festival attracted about 3,000 visitors in 2019.",
    "The festival is the largest in Europe.",
    "Membership is free for district residents.",
    "Visitors from elsewhere pay 50 euros a year.",
    "A mobile library van serves eleven villages.",
    "The van visits the villages every day.",
    "Since 2016 the library lends musical instruments.",
    "The library lends pianos and drums.",
    "The reading room overlooks the river Wend.",
    "The reading room seats 120 people.",
    "The library is probably the most beautiful building in Fenwick.",
    "The library may have been renovated in 2011.",
]
MULTI_ITEMS = [
    (
        [
            "Mount Kerrel is a dormant volcano 2,874 metres high.",
            "Its last eruption was in 1712.",
            "The first recorded ascent was made in 1863 by a team of four climbers from Lyon.",
            "A cable car built in 1974 reaches the northern shoulder at 2,100 metres.",
        ],
        [
            "Mount Kerrel is about 2,900 metres high.",
            "It last erupted in 1912.",
            "The first ascent was in 1863.",
            "Six climbers made the first ascent.",
            "A cable car reaches 2,100 metres.",
            "The cable car was built in 1974.",
            "The volcano is still active.",
            "The climbers came from Lyon.",
        ],
    ),
    (
        [
            "The Tessel ferry links Harwick and the island of Tessel in 35 minutes.",
            "It runs every hour between 6 a.m. and 10 p.m.",
            "The ship, the MV Gull, carries up to 400 passengers and 60 cars.",
            "A return ticket for an adult costs 18 euros; children under 12 travel free.",
        ],
        [
            "The crossing takes 35 minutes.",
            "The ferry runs every half hour.",
            "The last ferry leaves at 10 p.m.",
            "The MV Gull carries 400 passengers.",
            "The ship carries 200 cars.",
            "An adult return ticket costs 18 euros.",
            "Children under 12 travel free.",
            "The ferry is the fastest in the country.",
        ],
    ),
    (
        [
            "Brightwater Bakery was founded in 1952 by Ada and Tom Fellows.",
            "It bakes about 1,500 loaves a day in a wood-fired oven.",
            "The bakery won the national rye bread prize in 2018 and 2021.",
            "It has two shops, one on Mill Street and one at the station.",
        ],
        [
            "The bakery was founded in 1952.",
            "Ada and Tom Fellows founded it.",
            "It bakes around 1,500 loaves a day.",
            "The oven is electric.",
            "It won the rye bread prize in 2018.",
            "It won the prize three times.",
            "One shop is on Mill Street.",
            "The bakery has ten shops.",
        ],
    ),
    (
        [
            "The Lindqvist Observatory sits at 1,640 metres on the Varna plateau.",
            "Its main telescope has a mirror 2.4 metres across and saw first light in 1991.",
            "About 9,000 visitors tour the observatory each summer.",
            "Public viewing nights are held on the first Friday of each month.",
        ],
        [
            "The observatory is on the Varna plateau.",
            "It sits at about 1,600 metres.",
            "The main mirror is 2.4 metres across.",
            "The telescope saw first light in 2001.",
            "About 9,000 people visit each summer.",
            "Viewing nights are held every Friday.",
            "The observatory discovered a comet.",
            "Viewing nights are on the first Friday of the month.",
        ],
    ),
]


def workload_items(name: str, num_claims: int) -> list[tuple[list[str], list[str]]]:
    """(context, claims) items of a workload; claims repeat in order to reach `num_claims`."""
    if name == "single":
        claims = [SINGLE_CLAIMS[i % len(SINGLE_CLAIMS)] for i in range(num_claims)]
        return [(SINGLE_CONTEXT, claims)]
    if name == "multi":
        per_item = max(1, num_claims // len(MULTI_ITEMS))
        return [
            (context, [claims[i % len(claims)] for i in range(per_item)])
            for context, claims in MULTI_ITEMS
        ]
    if name == "rag":  # 6 claims per item, as many items as needed (at least 24)
        return rag_items(max(24, -(-num_claims // 6)))
    raise ValueError(f"unknown workload: {name} (known: single, multi, rag)")


# -- rag: long retrieved contexts, a few claims each (generated, no data files) ------------

_TOWNS = ["Aldmere", "Brisk", "Carrow", "Dunmore", "Elsby", "Farrow", "Glenholt", "Harlow"]
_THINGS = [
    ("water treatment plant", "cubic metres of water a day"),
    ("wind farm", "megawatt-hours a year"),
    ("regional hospital", "patients a year"),
    ("container port", "containers a month"),
    ("public library", "loans a year"),
    ("tram network", "passengers a day"),
]
_TOPICS = [
    "The {name} employs {a} people, {b} of them in maintenance.",
    "Its annual budget in {year} was {a} million euros, {b} percent more than the year before.",
    "An inspection in {year} found {a} minor faults and no major ones.",
    "The site covers {a} hectares, of which {b} are kept as a nature reserve.",
    "A training programme started in {year} has so far certified {a} technicians.",
    "The control room is staffed by {b} operators on each of its {a} daily shifts.",
    "In {year} the operator signed a supply contract worth {a} million euros.",
    "Noise measurements at the fence stayed below {a} decibels on {b} of 365 days.",
    "The oldest machine still in use was installed in {year} and has run {a} thousand hours.",
    "Visitor tours run on {b} days a month and drew {a} visitors last year.",
]


def _rag_item(index: int) -> tuple[list[str], list[str]]:
    """One item: ~1,500 tokens of report text about one facility, and 6 claims about it
    (3 copied from the text, 3 with a number changed)."""
    import random

    rng = random.Random(index)
    town = _TOWNS[index % len(_TOWNS)]
    thing, unit = _THINGS[index % len(_THINGS)]
    name = f"{town} {thing}"
    opened = rng.randint(1950, 2015)
    output = rng.randint(2, 900) * 100
    context = [
        f"The {name} opened in {opened} and produces or handles about {output:,} {unit}.",
    ]
    for section in range(7):
        for template in _TOPICS:
            context.append(
                template.format(
                    name=name,
                    year=rng.randint(opened, 2024),
                    a=rng.randint(3, 950),
                    b=rng.randint(2, 60),
                )
            )
        context.append(
            f"Section {section + 2} of the {opened + section + 1} annual report ends here."
        )
    picks = rng.sample(range(1, len(context)), 6)
    claims = []
    for n, at in enumerate(picks):
        sentence = context[at]
        if n % 2:  # change one number: a claim the text does not support
            numbers = [w for w in sentence.split() if w.rstrip(".,").isdigit()]
            if numbers:
                old = numbers[-1].rstrip(".,")
                sentence = sentence.replace(old, str(int(old) + 7), 1)
        claims.append(sentence)
    return context, claims


def rag_items(num_items: int = 24) -> list[tuple[list[str], list[str]]]:
    return [_rag_item(i) for i in range(num_items)]
