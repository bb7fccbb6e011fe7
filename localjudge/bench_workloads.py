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
    raise ValueError(f"unknown workload: {name} (known: single, multi)")
