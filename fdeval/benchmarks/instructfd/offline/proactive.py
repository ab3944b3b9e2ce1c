"""Offline grammars for the proactive scenarios (the user holds the floor).

Every conversation has four lines: the user's setup, the model's short invitation, the trigger
turn (pauses, and the model's cut-in marker in backchannel / interrupt scenarios), and the
model's reply. Content comes from the banks below (written for fdeval), phrasing from
alternatives picked by the conversation's generator.
"""

from __future__ import annotations

import random
from typing import Callable, NamedTuple

from fdeval.benchmarks.instructfd.offline.common import Ctx, opener
from fdeval.benchmarks.instructfd.offline.grammar import (
    lower_first,
    number_words,
    second_person,
    spell_digits,
)

Lines = list[tuple[str, str]]


# ================================================================================================
# Banks


class Plan(NamedTuple):
    key: str
    mine: str  # how the user names it
    steps: tuple[str, str, str, str]  # first-person clauses, in order
    remark: str  # the model's comment on the plan

    @property
    def topic(self) -> str:
        return PLAN_TOPICS[self.key]


PLANS: tuple[Plan, ...] = (
    Plan(
        "card_payoff",
        "my plan for paying off my credit cards",
        (
            "I stop putting anything new on the cards",
            "every payday an extra hundred dollars goes to the one with the highest interest",
            "I only pay the minimum on the others",
            "once the first one is gone I roll that money into the next",
        ),
        "That's the avalanche approach, and it saves you the most on interest.",
    ),
    Plan(
        "morning",
        "my new morning routine",
        (
            "I get up at six without touching snooze",
            "I drink a full glass of water before any coffee",
            "I do ten minutes of stretching on the living room floor",
            "then I write down the three things I absolutely have to get done",
        ),
        "That's a solid routine, and writing down three priorities keeps the day focused.",
    ),
    Plan(
        "meal_prep",
        "my meal prep routine",
        (
            "on Sunday I cook a big pot of rice and a tray of chicken",
            "I split it into five containers",
            "I use a different sauce each day so it doesn't get boring",
            "and whatever's left by Thursday goes in the freezer",
        ),
        "That's an efficient setup, and switching sauces is a smart way to avoid burnout.",
    ),
    Plan(
        "exam_study",
        "my study plan for the certification exam",
        (
            "I read one chapter every evening",
            "I make flash cards for the terms I keep forgetting",
            "on Saturdays I take a full practice test",
            "and on Sunday I go over everything I got wrong",
        ),
        "Practice tests plus reviewing your mistakes is one of the most effective ways to study.",
    ),
    Plan(
        "moving",
        "my plan for the move next month",
        (
            "I'm packing one room every weekend",
            "every box gets labeled with the room it goes to",
            "the movers are booked for the last Saturday of the month",
            "and I'm switching the internet over a week early",
        ),
        "That's well organized, and labeling by room will make unpacking much faster.",
    ),
    Plan(
        "garden_beds",
        "my garden bed layout",
        (
            "the tomatoes go along the back fence where it's sunniest",
            "the lettuce goes in the shady corner",
            "I'm planting marigolds between the rows to keep the bugs off",
            "and the herbs go in pots by the kitchen door",
        ),
        "That layout makes good use of the sun, and herbs by the door are handy for cooking.",
    ),
    Plan(
        "ten_k",
        "my training plan for a ten k",
        (
            "I run three days a week",
            "one of those runs is a slow long one",
            "I add about ten percent more distance each week",
            "and every fourth week I ease off to recover",
        ),
        "That's a sensible build, and the easy week every month helps you avoid injuries.",
    ),
    Plan(
        "guitar",
        "my guitar practice routine",
        (
            "I warm up with chord changes for fifteen minutes",
            "then I play one song all the way through with all the mistakes",
            "once a week I record myself",
            "and every Sunday I learn one new chord",
        ),
        "Recording yourself is a great habit; you'll hear progress you wouldn't notice otherwise.",
    ),
    Plan(
        "trip_savings",
        "my savings plan for our trip",
        (
            "I opened a separate savings account",
            "a fifth of every paycheck goes straight into it",
            "I cancelled two streaming services",
            "and any birthday money goes in there too",
        ),
        "Automating it into a separate account is the most reliable way to actually save.",
    ),
    Plan(
        "garage",
        "my plan for clearing out the garage",
        (
            "everything comes out onto the driveway",
            "I sort it all into piles to keep and donate and toss",
            "shelves go up along the back wall",
            "and the bikes hang from hooks on the ceiling",
        ),
        "Emptying it completely first is the right call; you'll see exactly what you have.",
    ),
    Plan(
        "new_hire",
        "my onboarding plan for the new hire",
        (
            "on day one they just shadow me",
            "on day two they take a few easy tickets",
            "by Thursday they run the morning checks on their own",
            "and on Friday we sit down and talk about what was confusing",
        ),
        "That's a nice gradual ramp, and the Friday check-in will catch problems early.",
    ),
    Plan(
        "party",
        "my plan for my son's birthday party",
        (
            "the kids arrive at two and play in the backyard",
            "at three we do a treasure hunt",
            "pizza and cake come out at four",
            "and the parents pick everyone up by five",
        ),
        "Three hours with a clear schedule is about right for that age.",
    ),
    Plan(
        "dog_training",
        "my dog training routine",
        (
            "I keep each session to about five minutes",
            "I only give a treat when he sits all the way down",
            "we practice right before meals when he's hungry",
            "and I always end on something he already knows",
        ),
        "Short sessions that end on a win are exactly how dogs learn best.",
    ),
    Plan(
        "cleaning",
        "my new cleaning schedule",
        (
            "Mondays are bathrooms",
            "on Wednesdays I vacuum the whole place",
            "Fridays are laundry and fresh sheets",
            "and the kitchen gets wiped down every night",
        ),
        "Spreading it across the week like that keeps any one day from feeling like a chore marathon.",
    ),
    Plan(
        "wedding_budget",
        "our wedding budget",
        (
            "we agreed on the total we can spend",
            "half of it goes to the venue and the food",
            "about a fifth goes to photos and music",
            "and we're keeping some aside for surprises",
        ),
        "Keeping a cushion for surprises is smart; something always comes up.",
    ),
    Plan(
        "podcast",
        "my plan for launching a podcast",
        (
            "I'm recording the first three episodes before launch",
            "I'm using a simple plug in microphone",
            "I edit on Sunday nights",
            "and a new episode goes out every other Tuesday",
        ),
        "Having a few episodes banked before launch takes a lot of pressure off.",
    ),
    Plan(
        "sleep",
        "my plan to fix my sleep",
        (
            "no screens after ten",
            "I read a paper book in bed instead",
            "the lights go off at ten thirty",
            "and I get up at the same time even on weekends",
        ),
        "A fixed wake-up time is probably the most powerful part of that plan.",
    ),
    Plan(
        "coffee",
        "my plan for cutting back on coffee",
        (
            "this week I went from four cups a day to three",
            "next week I drop to two",
            "the afternoon cup turns into decaf",
            "and I drink water whenever I hit a slump",
        ),
        "Tapering slowly like that should keep the headaches away.",
    ),
    Plan(
        "job_hunt",
        "my job hunting routine",
        (
            "I send out two applications every weekday",
            "I rewrite the cover letter for each one",
            "I keep a spreadsheet of where I've applied",
            "and if I hear nothing in two weeks I send a short follow up",
        ),
        "Tailoring each letter and following up puts you ahead of most applicants.",
    ),
    Plan(
        "kitchen_reno",
        "our kitchen renovation plan",
        (
            "the old cabinets come out first",
            "then the electrician moves the outlets",
            "after that the new floor goes in",
            "and the counters get installed last",
        ),
        "That order makes sense; doing the electrical before the finishes saves you from tearing things up twice.",
    ),
    Plan(
        "road_trip",
        "our plan for the family road trip",
        (
            "we leave Friday at five in the morning",
            "we stop every two hours so the kids can stretch",
            "we sleep in a motel about halfway",
            "and we get to the lake by Saturday lunch",
        ),
        "Breaking it up with an overnight stop will make it a lot easier on everyone.",
    ),
    Plan(
        "spanish",
        "my Spanish learning routine",
        (
            "I do twenty minutes on an app every morning",
            "I watch one show a week with Spanish subtitles",
            "I have a call with a tutor on Thursdays",
            "and I've labeled things around the house with sticky notes",
        ),
        "Mixing an app, real conversation and everyday reminders covers all the bases.",
    ),
    Plan(
        "bookkeeping",
        "my bookkeeping routine",
        (
            "every receipt gets photographed the same day",
            "on Fridays I enter them into a spreadsheet",
            "at the end of the month I check it against the bank statement",
            "and I set a quarter of the profit aside for taxes",
        ),
        "Setting tax money aside every month will save you a nasty surprise in April.",
    ),
    Plan(
        "plants",
        "my houseplant care routine",
        (
            "I water the ferns every three days",
            "the succulents only get water every two weeks",
            "every Sunday I turn each pot a quarter turn",
            "and in summer I feed them once a month",
        ),
        "Turning the pots is a nice touch; it keeps them from leaning toward the window.",
    ),
    Plan(
        "food_drive",
        "our plan for the neighborhood food drive",
        (
            "we put up flyers this weekend",
            "collection boxes go in the school and the library",
            "we pick everything up on the last Friday",
            "and on Saturday we sort it all at the church hall",
        ),
        "That's a clear plan; having the boxes in busy places should bring in a lot.",
    ),
    Plan(
        "retirement",
        "my retirement savings plan",
        (
            "I put six percent into the plan at work to get the full match",
            "I keep three months of expenses in savings",
            "anything extra goes into an index fund",
            "and I only look at it once a year",
        ),
        "Getting the full match first and checking rarely is a calm, solid approach.",
    ),
    Plan(
        "bike_lessons",
        "my plan for teaching my son to ride a bike",
        (
            "we took the pedals off so he can just push and glide",
            "once he can coast for a while the pedals go back on",
            "I hold the back of the seat instead of the handlebars",
            "and we practice on the grass so falling doesn't hurt",
        ),
        "Starting with gliding is a great way to build balance before pedaling.",
    ),
    Plan(
        "wardrobe",
        "my trick for clearing out my closet",
        (
            "I turned all the hangers backwards",
            "the hanger gets flipped around when I wear something",
            "anything still backwards after six months gets donated",
            "and one old thing goes for every new thing I buy",
        ),
        "The hanger trick is great because it shows you what you actually wear.",
    ),
    Plan(
        "novel",
        "my plan for finishing my novel",
        (
            "I write five hundred words every morning before work",
            "I don't edit anything until the draft is done",
            "I keep a notebook for ideas that come up during the day",
            "and I'm aiming to finish the draft by December",
        ),
        "Not editing until the draft is done is the hardest rule and the most useful one.",
    ),
    Plan(
        "swimming",
        "my plan for getting back into swimming",
        (
            "I go to the pool at lunch three days a week",
            "I start with four easy laps",
            "then I do drills with a kickboard",
            "and I finish with a few slow laps of backstroke",
        ),
        "That's a nice balanced session, with a warm up, some technique work and a cool down.",
    ),
)

PLAN_TOPICS: dict[str, str] = {
    "card_payoff": "a plan for paying off credit cards",
    "morning": "a new morning routine",
    "meal_prep": "a weekly meal prep routine",
    "exam_study": "a study plan for a certification exam",
    "moving": "a plan for moving house",
    "garden_beds": "a layout for the garden beds",
    "ten_k": "a training plan for a ten k race",
    "guitar": "a guitar practice routine",
    "trip_savings": "a savings plan for a trip",
    "garage": "a plan for clearing out the garage",
    "new_hire": "an onboarding plan for a new hire",
    "party": "the schedule for a child's birthday party",
    "dog_training": "a dog training routine",
    "cleaning": "a weekly cleaning schedule",
    "wedding_budget": "a wedding budget",
    "podcast": "a plan for launching a podcast",
    "sleep": "a plan to fix a sleep schedule",
    "coffee": "a plan for cutting back on coffee",
    "job_hunt": "a job hunting routine",
    "kitchen_reno": "the order of a kitchen renovation",
    "road_trip": "a family road trip plan",
    "spanish": "a routine for learning Spanish",
    "bookkeeping": "a bookkeeping routine for a small business",
    "plants": "a houseplant care routine",
    "food_drive": "a plan for a neighborhood food drive",
    "retirement": "a retirement savings plan",
    "bike_lessons": "a way of teaching a child to ride a bike",
    "wardrobe": "a trick for clearing out a closet",
    "novel": "a plan for finishing a novel",
    "swimming": "a plan for getting back into swimming",
}


class Decision(NamedTuple):
    key: str
    topic: str  # what is being decided (third person)
    a: str  # option A (verb phrase)
    b: str  # option B (verb phrase)
    why_a: str  # first person reason for A
    why_b: str  # first person reason for B
    cost: str  # what A costs (noun phrase)
    condition: str  # a condition on A (clause)


DECISIONS: tuple[Decision, ...] = (
    Decision(
        "weekend_trip",
        "where to spend a long weekend",
        "head to the coast",
        "go up to the mountains",
        "I haven't seen the ocean in ages",
        "it's a lot cooler up there",
        "the long drive",
        "the weather holds up",
    ),
    Decision(
        "job_offer",
        "a job offer",
        "take the new job",
        "stay where I am",
        "the pay is a lot better",
        "I really like my team",
        "leaving my friends at work behind",
        "they let me work from home on Fridays",
    ),
    Decision(
        "used_car",
        "whether to buy a car",
        "buy a used car",
        "keep taking the bus",
        "I'd save almost an hour every day",
        "the bus costs me almost nothing",
        "the insurance",
        "I can find one for under five thousand dollars",
    ),
    Decision(
        "dog",
        "whether to adopt a dog",
        "adopt a dog",
        "wait another year",
        "I've wanted one forever",
        "my apartment is really small",
        "finding someone to walk it while I'm at work",
        "my landlord says yes",
    ),
    Decision(
        "nursing_school",
        "going back to school",
        "go back to school for nursing",
        "keep working at the store",
        "I want a job that actually means something to me",
        "I'd keep a steady paycheck",
        "two years of barely earning anything",
        "I can take the classes at night",
    ),
    Decision(
        "move_home",
        "moving back near family",
        "move back near my parents",
        "stay in the city",
        "they're getting older",
        "all my work is here",
        "starting over without my friends",
        "I can keep my job remotely",
    ),
    Decision(
        "reno_order",
        "which renovation to do first",
        "redo the kitchen first",
        "fix the bathroom first",
        "we cook every single day",
        "the shower has been leaking",
        "eating takeout for a month",
        "the contractor can start in the spring",
    ),
    Decision(
        "sell_house",
        "what to do with the old house",
        "sell the house",
        "rent it out",
        "the sale would give us cash for the new place",
        "it would pay us something every month",
        "dealing with tenants",
        "prices stay where they are",
    ),
    Decision(
        "gym",
        "how to get back in shape",
        "join the gym down the street",
        "just work out at home",
        "I need people around me to stay motivated",
        "it's free",
        "the monthly fee",
        "they have a class before work",
    ),
    Decision(
        "wedding_size",
        "the size of a wedding",
        "have a small wedding",
        "invite everybody",
        "it would be so much calmer",
        "my family would love a big party",
        "hurting some feelings",
        "we throw a bigger party later",
    ),
    Decision(
        "laptop",
        "replacing a laptop",
        "buy a new laptop",
        "get my old one repaired",
        "mine is seven years old",
        "the repair is only about a hundred dollars",
        "the price",
        "there's a sale this month",
    ),
    Decision(
        "four_days",
        "cutting back at work",
        "cut back to four days a week",
        "keep working full time",
        "I'm exhausted by Thursday",
        "we need the money",
        "a fifth of my paycheck",
        "my manager agrees to it",
    ),
    Decision(
        "lawn_garden",
        "replacing the lawn with a vegetable garden",
        "turn the lawn into a vegetable garden",
        "keep the grass for the kids",
        "we could grow our own food",
        "they play out there every day",
        "all the weeding",
        "I keep a small patch of grass",
    ),
    Decision(
        "vacation",
        "how to spend a week off",
        "go visit my sister in Oregon",
        "take a real vacation somewhere new",
        "I haven't seen her in two years",
        "I never go anywhere just for me",
        "using up all my time off",
        "I can split the week",
    ),
    Decision(
        "major",
        "switching majors",
        "switch my major to computer science",
        "stick with biology",
        "I love the coding classes",
        "I'm already halfway done",
        "an extra year of school",
        "most of my credits carry over",
    ),
    Decision(
        "retire",
        "when to retire",
        "retire next year",
        "work three more years",
        "my knees are done with this job",
        "my pension would be a lot bigger",
        "a smaller monthly check",
        "our savings hold up",
    ),
    Decision(
        "bakery",
        "opening a bakery",
        "open my own bakery",
        "keep working for someone else",
        "I've been dreaming about it for years",
        "it's so much less risky",
        "most of my savings",
        "I can find a cheap spot",
    ),
    Decision(
        "piano",
        "an after-school activity for a daughter",
        "sign my daughter up for piano",
        "let her do soccer",
        "she loves making up songs",
        "all her friends play soccer",
        "buying a keyboard",
        "she still wants to in a month",
    ),
    Decision(
        "italian",
        "how to learn Italian",
        "take an evening class in Italian",
        "just use an app",
        "I'd actually have to show up",
        "I can do the app on the bus",
        "two evenings a week",
        "the class isn't full",
    ),
    Decision(
        "electric_car",
        "switching to an electric car",
        "get an electric car",
        "stick with a hybrid",
        "I'd never pay for gas again",
        "I drive long distances for work",
        "putting in a charger at home",
        "there's still a tax credit",
    ),
    Decision(
        "apartment",
        "choosing between two apartments",
        "take the bigger apartment farther out",
        "keep my little place downtown",
        "I'd finally have a spare room",
        "I can walk to work",
        "a forty minute commute",
        "the train runs on time",
    ),
    Decision(
        "thanksgiving",
        "hosting a holiday dinner",
        "host Thanksgiving at my place this year",
        "let my brother host again",
        "it's my turn",
        "his house is so much bigger",
        "cooking for twenty people",
        "everyone brings a dish",
    ),
    Decision(
        "social_media",
        "quitting social media",
        "delete my social media accounts",
        "just limit it to weekends",
        "I waste hours on it",
        "my family posts all their photos there",
        "missing out on news from friends",
        "I can still message people",
    ),
    Decision(
        "marathon",
        "signing up for a marathon",
        "sign up for the marathon in the fall",
        "do a half marathon first",
        "I've always wanted to run the full thing",
        "I've never run more than ten miles",
        "every Saturday morning for four months",
        "my knee holds up",
    ),
    Decision(
        "solar",
        "putting in solar panels",
        "put solar panels on the roof",
        "wait until the roof is replaced",
        "our power bills are huge",
        "the roof is pretty old",
        "the upfront price",
        "we get a good quote",
    ),
    Decision(
        "kitten",
        "adopting a foster kitten",
        "adopt the kitten I've been fostering",
        "keep fostering new ones",
        "I've gotten really attached to her",
        "I can help more cats that way",
        "giving up my spare room",
        "my roommate is okay with it",
    ),
    Decision(
        "teaching",
        "a career change into teaching",
        "become a teacher",
        "stay in accounting",
        "I love working with kids",
        "the pay is so much better",
        "going back for a teaching license",
        "I can student teach over the summer",
    ),
    Decision(
        "boat",
        "buying a fishing boat",
        "buy a small fishing boat",
        "just rent one a few times a year",
        "I'd be out on the lake every weekend",
        "renting means no upkeep",
        "storing it over the winter",
        "I find a decent used one",
    ),
    Decision(
        "college",
        "choosing a college",
        "go to the state school",
        "go to the private college",
        "I'd graduate without any debt",
        "they have a great film program",
        "the tuition",
        "I get the scholarship",
    ),
    Decision(
        "downsize",
        "downsizing",
        "sell the family house and move into a condo",
        "stay put",
        "the stairs are getting hard for us",
        "the kids grew up here",
        "letting go of the garden",
        "we find something near the grandkids",
    ),
)


class Story(NamedTuple):
    key: str
    topic: str
    tone: str  # sad | happy | scary
    before: str  # up to the heavy moment
    after: str  # what follows the pause
    reply: str  # the model's response


STORIES: tuple[Story, ...] = (
    Story(
        "dad_stroke",
        "a parent's stroke",
        "sad",
        "I got a call at work that my dad had collapsed, and by the time I got to the hospital he didn't know who I was",
        "it took months of therapy, but last week he called me just to say hi, and I sat in the car and cried",
        "That must have been terrifying, and hearing his voice like that sounds like such a gift. How are you holding up?",
    ),
    Story(
        "grandmother",
        "losing a grandmother",
        "sad",
        "my grandmother passed away in March, and I never got to say goodbye because my flight was delayed",
        "I keep her recipe box on my counter now, and every Sunday I cook one of her dishes",
        "I'm so sorry you missed that goodbye. Cooking her recipes sounds like a beautiful way to keep her close.",
    ),
    Story(
        "baby_news",
        "long-awaited pregnancy news",
        "happy",
        "after three years of trying, we found out last week that we're finally having a baby",
        "I still can't believe it, I keep staring at the scan on the fridge",
        "Oh, congratulations! After three years, that must feel unreal. How are you both feeling?",
    ),
    Story(
        "layoff",
        "being laid off",
        "sad",
        "on Friday they called me into a meeting and told me my whole department was being cut",
        "I'd been there eleven years, and I honestly don't know who I am without that job right now",
        "That's a huge loss, especially after eleven years. It makes sense that it shakes your sense of who you are.",
    ),
    Story(
        "old_dog",
        "saying goodbye to an old dog",
        "sad",
        "we had to put our old dog Biscuit to sleep on Tuesday, she was fifteen",
        "the house is so quiet now, and I still catch myself checking her bowl in the morning",
        "I'm so sorry. Fifteen years is a whole chapter of life, and those little habits hurt the most.",
    ),
    Story(
        "old_friend",
        "making up with an old friend",
        "happy",
        "my best friend and I hadn't spoken in five years after a silly fight, and then out of nowhere she sent me a letter",
        "we met for coffee on Saturday and talked for four hours like nothing had changed",
        "That's wonderful. Four hours after five years says a lot about how much you both missed each other.",
    ),
    Story(
        "separation",
        "telling the kids about a separation",
        "sad",
        "my wife and I decided to separate last month, and telling the kids was the hardest thing I've ever done",
        "my youngest just hugged me and asked if we'd still have pancakes on Sundays",
        "That sounds so hard. Her question shows how much those little rituals with you mean to her.",
    ),
    Story(
        "first_race",
        "running a first race after depression",
        "happy",
        "a year ago I could barely get out of bed, I was so depressed",
        "this morning I ran my first five k, and my sister was waiting for me at the finish line",
        "That's a huge accomplishment. Going from there to a finish line in a year is something to be really proud of.",
    ),
    Story(
        "fire",
        "a building fire",
        "scary",
        "there was a fire in our building last winter, and we got out with nothing but our coats",
        "the neighbors we'd barely spoken to showed up the next day with clothes and groceries",
        "How frightening. It's moving that the people you barely knew showed up like that. Are you settled now?",
    ),
    Story(
        "citizenship",
        "becoming a citizen",
        "happy",
        "I came to this country with one suitcase and I didn't speak any English",
        "yesterday I passed my citizenship interview, and my kids were cheering in the hallway",
        "Congratulations! That's an incredible journey, and what a moment to share with your kids.",
    ),
    Story(
        "biopsy",
        "a health scare",
        "scary",
        "after a routine checkup my doctor called me back in and said they'd found a lump",
        "the biopsy came back fine, but those two weeks of waiting changed how I think about everything",
        "I'm so glad it came back fine. Two weeks of not knowing is a long time to carry that.",
    ),
    Story(
        "graduation",
        "a mother's sacrifice and a graduation",
        "happy",
        "my mom cleaned offices at night for twenty years so I could go to college",
        "when I walked across the stage last month, she was the loudest person in the whole stadium",
        "What a moment for both of you. That diploma is really hers too.",
    ),
    Story(
        "bike_fall",
        "a child's accident",
        "scary",
        "my son fell off his bike and hit his head, and for a few minutes he wouldn't wake up",
        "he's completely fine now, but I still can't watch him ride down that hill",
        "That must have been the longest few minutes of your life. It makes sense that it stays with you.",
    ),
    Story(
        "lonely",
        "loneliness after a move",
        "sad",
        "since I moved here for work, I've gone whole weekends without saying a word to anyone",
        "last Sunday a neighbor knocked to invite me to a barbecue, and I almost said no out of habit",
        "That kind of loneliness is really heavy. I'm glad she knocked. Did you end up going?",
    ),
    Story(
        "proposal",
        "a proposal that went off script",
        "happy",
        "I had the ring in my pocket for two weeks, and then it poured rain on the day I'd planned",
        "I ended up asking her in the kitchen while we were burning pancakes, and she said yes",
        "Congratulations! Honestly, burnt pancakes in your own kitchen sounds like a perfect story.",
    ),
    Story(
        "bar_exam",
        "failing an exam again",
        "sad",
        "I failed the bar exam for the second time, and I had to tell my parents, who paid for all of it",
        "my dad just said he was proud of me for trying again, and somehow that made it harder not to cry",
        "That's a painful moment, and your dad's words sound like exactly what you needed, even if they hurt.",
    ),
    Story(
        "adoption",
        "an adoption match",
        "happy",
        "after two years of paperwork, the agency finally called and said they'd found a match for us",
        "we meet him next month, and I've already repainted his room three times",
        "That's wonderful news. Three coats of paint sounds like a lot of love already.",
    ),
    Story(
        "roommate",
        "the death of a friend",
        "sad",
        "my college roommate died suddenly last fall, he was only thirty four",
        "a few of us started a scholarship in his name, and the first student got it this week",
        "I'm so sorry. A scholarship in his name is a beautiful way to carry him forward.",
    ),
    Story(
        "father",
        "hearing from an absent father",
        "scary",
        "I hadn't seen my father since I was nine, and last month he reached out on my birthday",
        "we're meeting for lunch next week, and I can't tell if I'm more nervous or hopeful",
        "That's a lot to hold at once. Feeling both nervous and hopeful makes complete sense.",
    ),
    Story(
        "walked_out",
        "walking out of a job",
        "sad",
        "I walked out of my job in the middle of a shift because I just couldn't breathe anymore",
        "it's been three weeks, and for the first time in years I'm actually sleeping through the night",
        "That took courage. Sleeping through the night again says a lot about what that job was costing you.",
    ),
    Story(
        "lost_hiker",
        "a night lost on a mountain",
        "scary",
        "I got lost on a hike last summer and spent the whole night alone on the mountain",
        "a search team found me at sunrise, and I still send them a card every year",
        "What a frightening night. I love that you still thank them every year.",
    ),
    Story(
        "song",
        "a grandmother with dementia",
        "sad",
        "my grandmother has dementia, and on my last visit she didn't know who I was",
        "but when I started humming her favorite song, she sang the whole thing with me",
        "That's heartbreaking and beautiful at the same time. Music can reach people in a special way.",
    ),
    Story(
        "chemo",
        "finishing chemotherapy",
        "happy",
        "I had my last round of chemo on Thursday, and the nurses made me ring the bell",
        "my whole family was there, and I couldn't stop shaking",
        "Congratulations on ringing that bell. What a moment to have everyone there for.",
    ),
    Story(
        "restaurant",
        "closing the family restaurant",
        "sad",
        "we had to close the restaurant my parents opened thirty years ago",
        "on the last night, regulars lined up around the block just to say goodbye",
        "That line around the block says everything about what your family built. I'm sorry it had to end.",
    ),
    Story(
        "sober",
        "a year of sobriety",
        "happy",
        "today is exactly one year since my last drink",
        "my daughter made me a card, and it's the first time in a long while she's looked at me like that",
        "A whole year, congratulations. That card must mean the world to you.",
    ),
    Story(
        "flood",
        "a flooded home",
        "sad",
        "the river flooded our street in the spring and ruined the whole ground floor",
        "we're finally moving back in next week, and the kids have already picked out the paint",
        "That's been a long road. I'm glad you're almost home, and letting the kids pick the paint is lovely.",
    ),
)


class Problem(NamedTuple):
    key: str
    topic: str
    setup: str  # user's first description
    detail: str  # first part of the trigger turn
    more: str  # what the user says after coming back
    reply: str  # model's suggestion


PROBLEMS: tuple[Problem, ...] = (
    Problem(
        "laptop_heat",
        "a laptop that keeps shutting off",
        "my laptop keeps switching itself off",
        "it mostly happens when I'm on a video call",
        "it gets really hot right before it dies",
        "That sounds like overheating. Try cleaning the vents and keeping it on a hard surface during calls.",
    ),
    Problem(
        "wifi",
        "internet that drops every evening",
        "my internet keeps dropping out",
        "it's always in the evening, around eight",
        "the router lights all go orange when it happens",
        "That timing suggests congestion or a tired router. Restart it and ask your provider to check the line.",
    ),
    Problem(
        "washer",
        "a washing machine that bangs",
        "my washing machine has started making an awful noise",
        "it only happens when it spins",
        "it sounds like it's walking across the floor",
        "That's usually an unbalanced load or uneven feet. Check that it's level and spread the laundry out.",
    ),
    Problem(
        "brakes",
        "squeaky car brakes",
        "my car brakes have started squealing",
        "it's worst first thing in the morning",
        "it goes away after I've driven for a few minutes",
        "Morning squeal that fades is often just moisture on the rotors, but have the pads checked to be safe.",
    ),
    Problem(
        "battery",
        "a phone battery that drains fast",
        "my phone battery is dying way too fast",
        "it started right after the last update",
        "by lunchtime it's already down to twenty percent",
        "After an update, an app is often running in the background. Check the battery usage screen first.",
    ),
    Problem(
        "printer",
        "a printer that says it's offline",
        "my printer keeps saying it's offline",
        "it's plugged in and the light is on",
        "it worked fine until we got a new router",
        "A new router usually means the printer needs to rejoin the Wi-Fi. Run its network setup again.",
    ),
    Problem(
        "fridge",
        "a fridge that freezes food",
        "my fridge is freezing everything in the back",
        "the lettuce turns to ice overnight",
        "the front shelf is totally fine",
        "The back is right by the cold air vent. Turn the dial up a notch and keep produce away from the back wall.",
    ),
    Problem(
        "sourdough",
        "flat sourdough loaves",
        "my sourdough keeps coming out flat",
        "the starter bubbles up nicely",
        "the dough just spreads out like a pancake in the oven",
        "That often means the dough over-proofed or needs more tension. Try a shorter rise and tighter shaping.",
    ),
    Problem(
        "tomatoes",
        "tomato plants with yellow leaves",
        "my tomato plants are getting yellow leaves",
        "it's only the bottom leaves so far",
        "we've had a lot of rain this week",
        "Yellow lower leaves after lots of rain often point to overwatering or a nitrogen shortage. Pull them off and let the soil dry.",
    ),
    Problem(
        "nap",
        "a toddler who won't nap",
        "my toddler has stopped napping",
        "it started when we moved her into the big bed",
        "she just keeps climbing out and opening the door",
        "That's really common after the switch. A consistent routine and calmly walking her back usually helps within a week or two.",
    ),
    Problem(
        "smoke_alarm",
        "a chirping smoke alarm",
        "my smoke alarm keeps chirping",
        "I already put in a new battery",
        "it chirps about once a minute, mostly at night",
        "Some alarms need a reset after a battery change, and older units chirp when they're past their life. Check the date on the back.",
    ),
    Problem(
        "bike_chain",
        "a slipping bike chain",
        "the chain on my bike keeps slipping",
        "it happens when I push hard going uphill",
        "the pedals suddenly spin and I lurch forward",
        "That often means a worn chain or cassette. Have a shop measure the chain for stretch.",
    ),
    Problem(
        "hot_water",
        "a shower that won't get hot",
        "my shower never gets properly hot anymore",
        "it's fine at night",
        "in the morning it stays lukewarm the whole time",
        "That points to the water heater struggling with morning demand. It may need flushing, or the element could be failing.",
    ),
    Problem(
        "spreadsheet",
        "spreadsheet formulas that break",
        "my spreadsheet formulas keep breaking",
        "it happens when I copy them down a column",
        "every cell shows the same error",
        "That's usually the cell references shifting. Lock the fixed cells with dollar signs before you copy.",
    ),
    Problem(
        "spam",
        "emails going to spam",
        "my emails to clients keep landing in spam",
        "it's only the ones with attachments",
        "a couple of clients told me last week",
        "Big attachments can trigger spam filters. Try sending a link instead, and check your domain's email settings.",
    ),
    Problem(
        "fiddle_leaf",
        "a plant dropping leaves",
        "my fiddle leaf fig is dropping leaves",
        "it started after I moved it to the living room",
        "the new leaves have brown spots on them",
        "Those plants hate being moved. Put it back near bright, indirect light and water only when the top soil is dry.",
    ),
    Problem(
        "furnace",
        "a furnace that clicks but won't start",
        "my furnace clicks but won't turn on",
        "I can hear it trying",
        "then it just goes quiet and the house stays cold",
        "That often means the igniter or flame sensor. Check the filter first, then call a technician if it keeps happening.",
    ),
    Problem(
        "drain",
        "a slow bathroom drain",
        "my bathroom sink is draining really slowly",
        "it's been getting worse for a couple of weeks",
        "there's a weird smell coming up from it now",
        "That's usually hair and soap buildup. A plastic drain snake will usually clear it without chemicals.",
    ),
    Problem(
        "streaming",
        "a streaming app that freezes",
        "my streaming app keeps freezing",
        "it happens every few minutes during a show",
        "the sound keeps going but the picture stops",
        "Try clearing the app's cache and updating it; if that fails, lower the streaming quality.",
    ),
    Problem(
        "cat_box",
        "a cat avoiding the litter box",
        "my cat has stopped using the litter box",
        "it started when we switched litter brands",
        "she goes right next to the box instead",
        "Cats are picky about litter. Switch back to the old brand, and if it continues, have a vet rule out an infection.",
    ),
    Problem(
        "cast_iron",
        "a rusting cast iron pan",
        "my cast iron pan keeps getting rusty",
        "I wash it with soap and let it air dry",
        "there are orange spots on it the next morning",
        "Air drying is the culprit. Dry it on the burner right after washing and wipe on a thin coat of oil.",
    ),
    Problem(
        "teen_phone",
        "a teenager glued to his phone",
        "my teenager won't put his phone down at dinner",
        "we've asked him nicely a dozen times",
        "he says everyone else's parents let them",
        "A shared rule works better than a personal one. Try a basket where everyone's phone goes during dinner, yours too.",
    ),
    Problem(
        "knee",
        "a clicking knee",
        "my knee has started clicking on the stairs",
        "it doesn't really hurt",
        "it's louder going up than coming down",
        "Painless clicking is usually harmless, but strengthening the thigh muscles often helps. See a doctor if pain or swelling starts.",
    ),
    Problem(
        "back_pain",
        "back pain from working at home",
        "my back has been killing me since I started working from home",
        "I work at the kitchen table most days",
        "by the afternoon I can barely sit up straight",
        "A kitchen chair and table are rarely the right height. Raise your screen to eye level and take a short walk every hour.",
    ),
)


class Myth(NamedTuple):
    key: str
    topic: str
    setup: str  # user's first line (what they're working on)
    claim: str  # the false statement
    plan: str  # what they build on it
    correction: str  # model's quick cut-in
    reply: str  # model's full reply
    after: str  # what they do next (after I'll)


MYTHS: tuple[Myth, ...] = (
    Myth(
        "great_wall",
        "a geography lesson",
        "I'm putting together a geography lesson for my fifth graders",
        "the Great Wall of China is the only thing people built that you can see from the moon",
        "I'm going to have them look for it in the moon photos",
        "actually, you can't see the Great Wall from the moon",
        "From the moon, no buildings at all are visible to the naked eye. Even from low orbit the wall is very hard to spot, so it might work better as a myth-busting activity.",
        "hand out the worksheets about the moon landing",
    ),
    Myth(
        "ten_percent",
        "a memory course",
        "I'm thinking about signing up for an online memory course",
        "we only use ten percent of our brains",
        "this course says it can unlock the other ninety percent",
        "that's a myth, we actually use nearly all of our brain",
        "Brain scans show activity across almost the whole brain over a day. A course can still help with memory techniques, but not by unlocking unused parts.",
        "sign up for the course before the discount ends",
    ),
    Myth(
        "goldfish",
        "setting up a fish tank",
        "I'm setting up a tank for my kid's new goldfish",
        "goldfish only have a three second memory",
        "it doesn't really matter if the tank is boring",
        "actually goldfish can remember things for months",
        "Goldfish can learn feeding times and routines and remember them for months, so plants and hiding spots really do make their life better.",
        "just put in a little gravel and a plant",
    ),
    Myth(
        "bats",
        "a science presentation about bats",
        "my daughter is doing a school presentation on bats",
        "bats are completely blind",
        "her poster says they find everything just by sound",
        "bats aren't blind, they can actually see",
        "All bats can see, and some see quite well. Many also use echolocation, so the poster could say they use both.",
        "help her glue the pictures onto the poster board",
    ),
    Myth(
        "coriolis",
        "a physics demo",
        "I'm planning a little physics demo for my nephew",
        "sinks drain the other way in the southern hemisphere because of the earth spinning",
        "I'm going to show him with our bathroom sink",
        "that effect is way too weak to steer a sink",
        "The Coriolis effect matters for huge systems like hurricanes, but a sink drains whichever way its shape and the water's motion push it.",
        "fill up the bathtub and try it there too",
    ),
    Myth(
        "napoleon",
        "a history essay",
        "I'm helping my son with his history essay",
        "Napoleon was famously really short, like five foot two",
        "the essay argues he was overcompensating",
        "actually, he was about average height for his time",
        "The short image mostly came from a mix-up between French and English inches and from cartoons of the time. He was roughly average, so that argument won't hold up.",
        "help him write the conclusion this weekend",
    ),
    Myth(
        "einstein",
        "a motivational talk",
        "I'm writing a short motivational talk for my students",
        "Einstein failed math when he was in school",
        "I'm telling them grades don't predict anything",
        "he didn't, Einstein was actually great at math",
        "Einstein excelled at math from a young age. You could use a different example, like people who found their field late in life.",
        "end the talk with a story about my own bad grades",
    ),
    Myth(
        "sydney",
        "a trip to Australia",
        "I'm planning a trip to Australia next spring",
        "Sydney is the capital of Australia",
        "I want to book a tour of the parliament building while I'm there",
        "the capital is actually Canberra, not Sydney",
        "Australia's parliament sits in Canberra, about three hours' drive from Sydney. It's an easy day trip if you still want the tour.",
        "spend the rest of the week at the beaches",
    ),
    Myth(
        "toronto",
        "a trip to Canada",
        "we're taking the kids to Canada this summer",
        "Toronto is the capital of Canada",
        "I thought we'd see the parliament buildings there",
        "the capital of Canada is Ottawa",
        "Parliament Hill is in Ottawa, which is a few hours from Toronto by train, so you could add a day there.",
        "drive over to see Niagara Falls on the last day",
    ),
    Myth(
        "pacific",
        "a trivia night",
        "I'm writing questions for a trivia night at the library",
        "the Pacific is the smallest ocean on the planet",
        "that's going to be my trick question",
        "it's actually the biggest ocean",
        "The Pacific is the largest and deepest ocean. The smallest is the Arctic, which would make a good trick question instead.",
        "add a picture round about famous islands",
    ),
    Myth(
        "mars_year",
        "a science fair project",
        "my son's science fair project is about the planets",
        "a year on Mars is shorter than a year here",
        "he's going to say it's because Mars is smaller",
        "a Mars year is actually almost two of ours",
        "Mars is farther from the sun, so it takes about six hundred eighty seven Earth days to go around once. Size doesn't decide the length of a year.",
        "help him make a model of the solar system",
    ),
    Myth(
        "sound_water",
        "a diving lesson",
        "I'm teaching a beginner scuba class on Saturday",
        "sound travels slower underwater than in air",
        "I'll tell them they'll hear boats late",
        "no, sound travels about four times faster in water",
        "Sound moves much faster through water, which is part of why it's hard to tell which direction a boat is coming from.",
        "go over the hand signals for the first dive",
    ),
    Myth(
        "diamonds",
        "a talk about gemstones",
        "I'm giving a little talk about gemstones at my rock club",
        "diamonds are just coal that got squeezed really hard",
        "I'm opening with a lump of coal as a prop",
        "most diamonds didn't come from coal",
        "Diamonds form from carbon much deeper in the earth than coal ever is. The coal prop could work as a myth to bust at the start.",
        "pass around a few rough crystals from my collection",
    ),
    Myth(
        "moon_light",
        "a kids' astronomy night",
        "I'm hosting an astronomy night for the kids in our building",
        "the moon makes its own light",
        "I'll explain a new moon as it switching off",
        "the moon doesn't glow, it reflects sunlight",
        "The moon only reflects light from the sun. At a new moon the lit side faces away from us, which you could show with a lamp and a ball.",
        "let the kids look through the telescope on the roof",
    ),
    Myth(
        "spiders",
        "a lesson about bugs",
        "I'm planning a bug unit for my second graders",
        "spiders are insects",
        "I'm putting them on the insect chart next to the ants",
        "spiders are actually arachnids, not insects",
        "Spiders have eight legs and two body parts, while insects have six legs and three. That difference makes a great sorting activity.",
        "take the kids outside to look for bugs in the garden",
    ),
    Myth(
        "edison_phone",
        "a trivia quiz",
        "I'm writing a quiz for our family game night",
        "Thomas Edison invented the telephone",
        "that's going to be the answer to question one",
        "the telephone is usually credited to Alexander Graham Bell",
        "Bell got the first telephone patent. Edison worked on other things like the phonograph, which could be a good question too.",
        "write the questions for the sports round",
    ),
    Myth(
        "independence",
        "a history lesson",
        "I'm prepping a history lesson on the founding of the country",
        "the Declaration of Independence was signed in eighteen twelve",
        "I'm linking it to the war that year",
        "it was seventeen seventy six, not eighteen twelve",
        "The Declaration was adopted in seventeen seventy six. The War of eighteen twelve came much later, so they'd need separate lessons.",
        "have the class read some letters from that time",
    ),
    Myth(
        "penguins",
        "an Arctic cruise",
        "my husband and I booked a cruise to the Arctic",
        "penguins live up at the North Pole",
        "I'm really hoping we see some",
        "penguins actually live in the southern hemisphere",
        "Wild penguins live almost entirely south of the equator. In the Arctic you might see polar bears, walruses and puffins instead.",
        "pack our warmest coats and the good binoculars",
    ),
    Myth(
        "boiling",
        "cooking at altitude",
        "I just moved up to Denver and I'm cooking for friends",
        "water boils at the same temperature everywhere",
        "my pasta should cook in the usual time",
        "up there water boils at a lower temperature",
        "At Denver's altitude water boils a few degrees cooler, so pasta usually needs a couple of extra minutes.",
        "make a big salad while the sauce simmers",
    ),
    Myth(
        "sahara",
        "a geography quiz",
        "I'm making a geography quiz for my book club",
        "the Sahara is the biggest desert in the world",
        "that's the first answer on the sheet",
        "technically Antarctica is the biggest desert",
        "Deserts are defined by how little rain they get, so Antarctica counts and it's the largest. The Sahara is the largest hot desert.",
        "print out copies for everyone in the club",
    ),
    Myth(
        "penny",
        "a physics question",
        "my class is learning about gravity this week",
        "a penny dropped from a skyscraper could kill someone on the sidewalk",
        "I want to use it as the hook",
        "it couldn't, air resistance slows it way down",
        "A penny is light and flat, so it reaches a gentle top speed. It might sting, but it won't hurt anyone badly.",
        "move on to how parachutes slow things down",
    ),
    Myth(
        "chameleon",
        "a reptile presentation",
        "I'm giving a presentation about reptiles at the library",
        "chameleons change color to match whatever they're sitting on",
        "I'm going to show that with a video",
        "they mostly change color for mood and temperature",
        "Chameleons change color mainly to signal other chameleons and to manage heat. Camouflage is more about their normal colors.",
        "let the kids hold the little lizard from the pet store",
    ),
    Myth(
        "pluto",
        "a solar system poster",
        "I'm helping my daughter with her solar system poster",
        "Pluto is the ninth planet",
        "she's painting nine planets in a row",
        "Pluto's been called a dwarf planet since two thousand six",
        "Pluto was reclassified in two thousand six, so today there are eight planets. She could add Pluto off to the side as a dwarf planet.",
        "help her glue the labels under each planet",
    ),
    Myth(
        "mercury_hot",
        "a space unit",
        "I'm teaching a unit on the planets next week",
        "Mercury is the hottest planet because it's closest to the sun",
        "the kids will rank them by distance",
        "Venus is actually hotter than Mercury",
        "Venus has a thick atmosphere that traps heat, so it's the hottest planet even though Mercury is closer. That's a nice twist for the lesson.",
        "have them draw the planets on a long strip of paper",
    ),
    Myth(
        "lightning",
        "a camping trip",
        "I'm taking the scouts camping this weekend",
        "lightning never strikes the same place twice",
        "the tree that got hit last year is the safest spot",
        "it can strike the same place many times",
        "Lightning often hits the same tall object again. In a storm the kids should stay away from tall trees and get into a car or building.",
        "set up the tents before the rain starts",
    ),
    Myth(
        "tomato_fruit",
        "a gardening quiz",
        "I'm writing a quiz for the garden club newsletter",
        "tomatoes are vegetables if you go by the science",
        "I'm putting them with the carrots",
        "botanically, a tomato is a fruit",
        "A tomato grows from the flower and holds seeds, so botanists call it a fruit, even though cooks treat it as a vegetable.",
        "send the newsletter out to everyone on Friday",
    ),
)


class Hazard(NamedTuple):
    key: str
    topic: str
    setup: str
    plan: str  # the dangerous plan, said casually
    then: str  # what they do next (after I'll, at least six words)
    warning: str  # model's cut-in
    reply: str


HAZARDS: tuple[Hazard, ...] = (
    Hazard(
        "bleach_vinegar",
        "cleaning a bathroom",
        "I'm finally deep cleaning the bathroom this weekend",
        "I'm going to mix bleach with vinegar so it cuts through the grime faster",
        "scrub the whole shower and the tiles with it",
        "don't mix those, bleach and vinegar make a toxic gas",
        "Bleach and acids like vinegar release chlorine gas, which can hurt your lungs. Use one product at a time, rinse in between, and open a window.",
    ),
    Hazard(
        "grease_fire",
        "deep frying at home",
        "I'm going to try deep frying chicken at home for the first time",
        "if the oil catches fire I'll just throw a glass of water on it",
        "keep going with the next batch of chicken",
        "never put water on a grease fire, cover it with a lid",
        "Water makes burning oil explode outward. Turn off the heat and slide a lid or baking sheet over the pot, and keep a fire extinguisher nearby.",
    ),
    Hazard(
        "generator",
        "a power outage",
        "the power's been out since last night and I borrowed a generator",
        "I'm going to run it in the garage with the door open a crack",
        "plug the fridge and the freezer into it",
        "please don't, run it outside, away from the house",
        "Generators make carbon monoxide, which builds up fast even in a garage with the door open. Keep it outside, well away from windows and doors.",
    ),
    Hazard(
        "honey_baby",
        "a baby with a cough",
        "my four month old has had a little cough for two days",
        "I'm going to give her a spoonful of honey like my mom used to",
        "put her down for her afternoon nap in the crib",
        "babies under one shouldn't have honey",
        "Honey can cause infant botulism in babies under a year old. Call your pediatrician about the cough instead.",
    ),
    Hazard(
        "turkey_counter",
        "thawing a turkey",
        "I'm hosting Thanksgiving and the turkey is still frozen solid",
        "I'll leave it out on the counter for two days to thaw",
        "brine it in a big cooler on Wednesday night",
        "don't thaw it on the counter, use the fridge or cold water",
        "On the counter the outside sits in the danger zone where bacteria grow fast. Thaw it in the fridge, or in cold water you change every half hour.",
    ),
    Hazard(
        "car_garage",
        "warming up a car in winter",
        "it's been freezing every morning this week",
        "I'm going to start the car in the garage with the door shut so it warms up",
        "go back inside and finish my coffee",
        "never run the car with the garage closed",
        "A running car can fill a closed garage with carbon monoxide in minutes, and it can seep into the house. Open the door fully or warm it up outside.",
    ),
    Hazard(
        "butter_burn",
        "treating a burn",
        "I just grabbed a hot pan and burned my palm",
        "I'm putting butter on it because that's what my grandma did",
        "wrap it up in a dish towel and keep cooking",
        "skip the butter, run it under cool water",
        "Butter holds the heat in and can cause infection. Cool it under running water for about twenty minutes, and get it checked if it blisters badly.",
    ),
    Hazard(
        "charcoal_tent",
        "a cold camping trip",
        "we're camping this weekend and it's supposed to get really cold",
        "I'll bring the little charcoal grill into the tent to keep us warm",
        "zip everything up tight for the night",
        "no, never burn charcoal inside a tent",
        "Burning charcoal gives off carbon monoxide, which can kill in an enclosed tent. Bring warmer sleeping bags and extra layers instead.",
    ),
    Hazard(
        "space_heater",
        "keeping an office warm",
        "my home office is freezing",
        "I'm plugging the space heater into a power strip under the desk, right by the curtains",
        "leave it running all day while I work",
        "heaters should go straight into the wall and away from curtains",
        "Space heaters draw a lot of power and can overheat power strips. Plug it into the wall and keep it at least three feet from anything that burns.",
    ),
    Hazard(
        "acetaminophen",
        "a bad headache",
        "I've had a pounding headache all afternoon",
        "I'm going to take a few extra painkillers with a glass of wine since they're just over the counter",
        "lie down on the couch for a bit",
        "don't mix those, and stick to the label dose",
        "Extra acetaminophen, especially with alcohol, can seriously damage your liver. Take the normal dose with water, and see a doctor if it keeps up.",
    ),
    Hazard(
        "ladder",
        "cleaning gutters",
        "I'm cleaning out the gutters this afternoon",
        "I'll stand on the very top step of the ladder so I can reach",
        "lean way over to get the far corner",
        "don't stand on the top step, it's not safe",
        "The top step isn't made to stand on and it's easy to tip. Use a taller ladder, move it often instead of leaning, and have someone hold it.",
    ),
    Hazard(
        "power_line",
        "a fallen power line",
        "a storm knocked a power line down across my driveway",
        "I'm going to push it out of the way with a broom since it's probably dead anyway",
        "back the car out and head to work",
        "stay away from it, it could still be live",
        "Downed lines can be live even when they look dead, and a broom won't protect you. Keep well back and call the power company.",
    ),
    Hazard(
        "coffee_drive",
        "driving home after drinks",
        "I'm at my cousin's wedding and I've had a few drinks",
        "I'll just have a couple of coffees to sober up before I drive home",
        "head out around eleven before the roads get busy",
        "coffee won't sober you up, please get a ride",
        "Coffee might make you feel more awake, but only time lowers your blood alcohol. Get a ride or stay over.",
    ),
    Hazard(
        "frostbite",
        "cold fingers after shoveling",
        "I was shoveling snow for an hour and my fingers are white and numb",
        "I'm going to rub them with snow to get the blood going",
        "run them under really hot water in the sink",
        "don't rub them, warm them gently",
        "Rubbing damages frozen skin, and hot water can burn it because you can't feel it. Rewarm in lukewarm water and get medical help if they stay numb.",
    ),
    Hazard(
        "mushrooms",
        "cooking wild mushrooms",
        "a bunch of mushrooms popped up in my backyard after the rain",
        "they look just like the ones from the store so I'm going to fry them up",
        "serve them with dinner to the whole family",
        "please don't eat them, lots of poisonous ones look the same",
        "Several deadly mushrooms look almost exactly like edible ones. Don't eat any wild mushroom unless an expert has identified it in person.",
    ),
    Hazard(
        "baby_car",
        "a quick errand with a baby",
        "I just need to run into the pharmacy for five minutes",
        "I'll leave the baby in the car with the windows cracked",
        "run in and grab my prescription at the counter",
        "don't leave her in the car, even for a few minutes",
        "A car can heat up dangerously in just a few minutes, even with the windows open. Take her in with you.",
    ),
    Hazard(
        "drain_mix",
        "a clogged drain",
        "my kitchen sink is totally clogged",
        "the first drain cleaner didn't work, so I'll pour a different one in on top",
        "let it all sit in there overnight",
        "don't mix drain cleaners, they can react violently",
        "Different drain cleaners can boil, splatter or give off toxic fumes when mixed. Flush with water and use a plunger or a drain snake instead.",
    ),
    Hazard(
        "gas_lighter",
        "a gas smell",
        "I can smell gas in the kitchen",
        "I'm going to use a lighter to figure out where the smell is coming from",
        "tighten whatever fitting turns out to be loose",
        "no flames, get out and call the gas company",
        "A flame can ignite the gas. Don't flip switches either; get everyone outside and call the gas company from there.",
    ),
    Hazard(
        "aspirin_kid",
        "a child with the flu",
        "my nine year old came down with the flu yesterday",
        "I'm going to give her some of my aspirin for the fever",
        "keep her home from school for a day or two",
        "don't give aspirin to a child with the flu",
        "In children with flu, aspirin is linked to Reye's syndrome, which is rare but serious. Ask your pharmacist about a children's fever reducer.",
    ),
    Hazard(
        "frozen_turkey_fry",
        "frying a turkey",
        "we're deep frying a turkey for the first time this year",
        "I'm going to drop it straight into the hot oil while it's still frozen",
        "set the fryer up on the wooden deck",
        "don't fry it frozen, the oil can boil over",
        "Ice in a frozen turkey turns to steam instantly and can push burning oil over the pot. Thaw it completely, pat it dry, and fry it far from the house.",
    ),
    Hazard(
        "baby_tummy",
        "a baby's sleep",
        "my newborn sleeps so badly on her back",
        "tonight I'm going to put her down on her tummy",
        "see if she sleeps a bit longer that way",
        "babies should always sleep on their backs",
        "Back sleeping lowers the risk of sudden infant death. Try a snug swaddle or a white noise machine instead, and ask your pediatrician.",
    ),
    Hazard(
        "co_detector",
        "a beeping detector",
        "the carbon monoxide detector in the hallway keeps beeping",
        "I'll just take the batteries out so it stops",
        "go back to bed and deal with it tomorrow",
        "don't disable it, it may be warning you",
        "That beep may mean there really is carbon monoxide. Get everyone into fresh air and call for help, then check the unit.",
    ),
    Hazard(
        "gasoline_floor",
        "cleaning a garage floor",
        "the garage floor is covered in old oil stains",
        "I'm going to scrub it with gasoline since that dissolves grease",
        "leave the heater running while it dries",
        "don't use gasoline, the fumes can catch fire",
        "Gasoline fumes spread and can be ignited by a heater or a spark. Use a proper degreaser and keep the space ventilated.",
    ),
    Hazard(
        "antibiotics",
        "a sore throat",
        "I've had a sore throat for a couple of days",
        "I'm going to take my roommate's leftover antibiotics",
        "skip going to the doctor this time",
        "don't take someone else's antibiotics",
        "Most sore throats are viral, and the wrong antibiotic won't help and can cause side effects. See a doctor or pharmacist.",
    ),
    Hazard(
        "ebike_bed",
        "charging an e-bike",
        "I just got an electric bike for my commute",
        "I'll charge the battery overnight on my bed so it's ready in the morning",
        "head out early for work tomorrow",
        "don't charge it on your bed overnight",
        "Lithium batteries can overheat and catch fire. Charge it on a hard surface away from anything that burns, and not while you sleep.",
    ),
)


class Clash(NamedTuple):
    key: str
    topic: str
    setup: str  # user line establishing the fact (may mention it in passing)
    clash: str  # the contradicting statement
    then: str  # how they carry on (after I'll, at least six words)
    catch: str  # model's cut-in
    reply: str


CLASHES: tuple[Clash, ...] = (
    Clash(
        "vegetarian",
        "planning a dinner",
        "I'm cooking dinner for my parents on Sunday, and since I'm vegetarian "
        "I want something they'll like too",
        "make a big salad on the side for everyone",
        "make a salad on the side",
        "wait, didn't you say you're vegetarian?",
        "Just to check, are you vegetarian? If so, a grilled portobello or halloumi could give you that barbecue feel.",
    ),
    Clash(
        "free_weekend",
        "scheduling a move",
        "I'm helping my sister move, and luckily I'm completely free all weekend",
        "I'm working both days this weekend, so we'll do it at night",
        "order pizza for everyone who comes to help",
        "hold on, I thought you said you were free all weekend",
        "I may have misheard. Are you free this weekend, or working? That changes whether evenings make sense.",
    ),
    Clash(
        "budget",
        "buying a laptop",
        "I need a new laptop for school, and my budget is five hundred dollars, tops",
        "I'm leaning toward the one that's nine hundred",
        "pick it up from the store this week",
        "wait, isn't that way over your five hundred budget?",
        "That one is nearly double the budget you mentioned. Do you want options around five hundred, or has the budget changed?",
    ),
    Clash(
        "cat_allergy",
        "getting a pet",
        "I'd love a pet, but I'm really allergic to cats",
        "I'm thinking of adopting a kitten from the shelter",
        "set up the litter box in the bathroom this weekend",
        "wait, didn't you say you're allergic to cats?",
        "With a cat allergy, a kitten could be rough. Do you want to look at low-allergy pets, or talk to an allergist first?",
    ),
    Clash(
        "no_driving",
        "getting to an appointment",
        "I need to get to a dentist across town, and I don't drive",
        "I'll just drive over there after work",
        "park in the garage right next door",
        "hang on, you said you don't drive",
        "You mentioned you don't drive. Should we look at buses or a ride share, or do you have a car now?",
    ),
    Clash(
        "toddler_age",
        "choosing a school",
        "my daughter just turned three, and I'm looking at preschools",
        "she's starting high school next year",
        "look for one with a really good science program",
        "wait, didn't you say she's three?",
        "Just to check, is this for your three year old? Preschools and high schools are very different searches.",
    ),
    Clash(
        "hate_flying",
        "planning trips",
        "I'm planning my travel for the year, and honestly I hate flying",
        "I booked flights for all four trips because flying is the best part",
        "pick window seats on every single flight",
        "hold on, I thought you hated flying",
        "Earlier you said you hate flying. Do you want to look at trains for some of those trips, or is flying fine after all?",
    ),
    Clash(
        "live_alone",
        "cutting home costs",
        "I live alone, so I'm trying to keep my bills down",
        "my roommate and I split everything down the middle",
        "cancel cable and switch to a cheaper phone plan",
        "wait, I thought you said you live alone",
        "Do you have a roommate, or live alone? It changes which bills are worth cutting.",
    ),
    Clash(
        "party_day",
        "party preparations",
        "the surprise party is on Saturday night, and I'm handling the food",
        "the party's on Friday night",
        "pick up the cake on Thursday after work",
        "wait, is it Friday or Saturday?",
        "You said Saturday earlier. Which day is it? That decides when the cake should be picked up.",
    ),
    Clash(
        "never_italy",
        "a trip to Italy",
        "I've never been to Italy, and I finally booked a week there",
        "the last time I was in Rome the food was amazing",
        "go back to all the same places again",
        "hold on, you said you'd never been to Italy",
        "You mentioned this would be your first time. Have you been to Rome before? I can plan differently if so.",
    ),
    Clash(
        "no_sugar",
        "a meal plan",
        "I'm putting together a meal plan, and I'm trying to cut out sugar completely",
        "I'll have a bowl of ice cream every night after dinner",
        "bake cookies with the kids on weekends",
        "wait, didn't you say you're cutting out sugar?",
        "That clashes with cutting out sugar. Do you want a dessert with no added sugar, like baked apples or yogurt with berries?",
    ),
    Clash(
        "two_kids",
        "a family vacation",
        "we're planning a beach trip with our two kids",
        "I'm booking a room big enough for our three kids",
        "look for a place right near the water",
        "hold on, two kids or three?",
        "You said two kids earlier and three just now. How many are coming? It changes the room size.",
    ),
    Clash(
        "retired",
        "taking a day off",
        "I retired in the spring, so my days are pretty open",
        "I'll ask my boss for Thursday off",
        "drive down to see my brother for the day",
        "wait, I thought you said you were retired",
        "You mentioned you're retired. Are you working somewhere again? If not, Thursday sounds wide open.",
    ),
    Clash(
        "lactose",
        "planning a dessert",
        "I'm lactose intolerant, so I want a dessert that won't bother me",
        "I'll make a big creamy cheesecake",
        "serve it with a big bowl of whipped cream",
        "wait, won't that be a problem if you're lactose intolerant?",
        "Cheesecake and whipped cream are full of lactose. There are good lactose-free cream cheeses, or we could pick a fruit dessert.",
    ),
    Clash(
        "morning_meeting",
        "preparing for a meeting",
        "my meeting with the new client is first thing in the morning",
        "the meeting's at four in the afternoon",
        "go over the slides during my lunch break",
        "hold on, is it in the morning or the afternoon?",
        "You said first thing in the morning a moment ago. Which is it? If it's morning, you'd need to prep tonight.",
    ),
    Clash(
        "no_car",
        "getting groceries",
        "I don't own a car, so I do big grocery runs once a week",
        "I park my car right by the entrance",
        "load everything up in the trunk and drive home",
        "wait, didn't you say you don't have a car?",
        "You said you don't own a car. Do you borrow one, or should we plan around a delivery or a cart?",
    ),
    Clash(
        "peanut",
        "packing lunches",
        "I'm allergic to peanuts, so I pack my own lunch every day",
        "I'll make peanut butter sandwiches for the whole week",
        "add some fruit and a granola bar to each bag",
        "wait, aren't you allergic to peanuts?",
        "That sounds risky with a peanut allergy. Sunflower seed butter makes a sandwich that tastes very similar.",
    ),
    Clash(
        "never_run",
        "starting to run",
        "I've never run before in my life, and I want to start",
        "when I ran my last marathon my knees were fine",
        "just do ten miles on Saturday to start",
        "hold on, you said you've never run before",
        "You said you're brand new to running. If that's right, ten miles is far too much to start with. Let's begin with run walk intervals.",
    ),
    Clash(
        "from_home",
        "a morning routine",
        "I work from home, so my mornings are pretty flexible",
        "my commute to the office takes an hour each way",
        "get up by five so I'm not late",
        "wait, didn't you say you work from home?",
        "You said you work from home, then mentioned a commute. Are some days in the office? That changes the plan.",
    ),
    Clash(
        "no_balcony",
        "summer cooking",
        "my apartment doesn't have a balcony, so summer cooking is tricky",
        "I'll set the grill up on my balcony",
        "invite all the neighbors over on Saturday",
        "hold on, you said you don't have a balcony",
        "You said there's no balcony. Do you have one after all, or should we look at stovetop grilling?",
    ),
    Clash(
        "saving",
        "holiday spending",
        "I'm saving every penny this year for a down payment",
        "I'm buying a huge new TV this weekend",
        "get a sound bar to go with it too",
        "wait, I thought you were saving every penny",
        "That clashes with saving every penny. Do you want to set a small fun budget, or hold off on the TV?",
    ),
    Clash(
        "flight_day",
        "packing for a trip",
        "my flight leaves Tuesday morning",
        "I don't fly out until Thursday",
        "do all my laundry on Wednesday night",
        "wait, is it Tuesday or Thursday?",
        "You first said Tuesday. Which is it? If it's Tuesday, laundry on Wednesday is too late.",
    ),
    Clash(
        "no_coffee",
        "cutting caffeine",
        "I don't drink coffee, but I still feel wired at night",
        "I have my usual three cups in the afternoon",
        "have a soda with dinner like always",
        "hold on, didn't you just say you don't drink coffee?",
        "Three afternoon cups would explain feeling wired. Do you drink coffee, or was that tea? Either way, the timing matters.",
    ),
    Clash(
        "heights",
        "planning a city trip",
        "I'm really scared of heights, so I want a relaxed city trip",
        "I'm booking the glass floor skywalk on the first day",
        "book dinner at the top of the tower",
        "wait, aren't you scared of heights?",
        "Those are both very high up. Do you want to push yourself, or should we swap in something at ground level?",
    ),
    Clash(
        "moving_month",
        "planning a move",
        "we're moving in June, so I'm starting to pack",
        "we don't move until August",
        "start packing up the kitchen in July",
        "hold on, June or August?",
        "You said June a moment ago. Which is it? If it's June, packing in July would be too late.",
    ),
    Clash(
        "no_pets",
        "apartment hunting",
        "I don't have any pets, so any apartment works for me",
        "it has to have a yard for my dog",
        "look for something close to a big park",
        "wait, I thought you didn't have pets",
        "You said you don't have pets, then mentioned your dog. If there is a dog, we'll need pet-friendly places with a yard.",
    ),
)


class Word(NamedTuple):
    key: str
    word: str
    setup: str  # what the user is doing
    lead: str  # what they say before reaching for the word
    description: str  # describing it
    tail: str  # continuation after the model's guess (ten words or more)
    tip: str  # model's follow up


WORDS: tuple[Word, ...] = (
    Word(
        "colander",
        "a colander",
        "I'm making a list of kitchen stuff for my new apartment",
        "I've got pots and pans, but I still need",
        "the bowl with all the little holes you drain pasta in",
        "because mine got left behind at my old place when I moved",
        "A basic metal one is cheap and will last for years.",
    ),
    Word(
        "whisk",
        "a whisk",
        "I'm trying a pancake recipe for the first time",
        "it says to beat the eggs with",
        "the metal thing with the wire loops",
        "but all I have in the drawer right now is a fork",
        "A fork works fine too, just beat a little longer.",
    ),
    Word(
        "ladle",
        "a ladle",
        "I made a huge pot of soup for my neighbors",
        "and I need to serve it with",
        "that big deep spoon with the long handle",
        "because mine snapped in half the last time I made chili",
        "In a pinch, a measuring cup works as a scoop.",
    ),
    Word(
        "spirit_level",
        "a level",
        "I'm hanging shelves in my living room",
        "and I want to use",
        "the tool with the little bubble in it that shows if it's straight",
        "so the books don't all slide off to one side",
        "Many phones have a level built into the measure app too.",
    ),
    Word(
        "stud_finder",
        "a stud finder",
        "I'm mounting a TV on the wall",
        "and my brother said to borrow",
        "the gadget you slide along the wall to find the wood behind it",
        "so the screws actually hold and the whole thing doesn't fall",
        "Good idea, a TV should always go into studs or use heavy anchors.",
    ),
    Word(
        "thermostat",
        "a thermostat",
        "I'm trying to cut down my heating bill",
        "and I want to replace",
        "the box on the wall that controls the heat",
        "with a newer one that I can program from my phone",
        "A programmable one can save a lot if it turns the heat down while you sleep.",
    ),
    Word(
        "plunger",
        "a plunger",
        "I'm getting my first apartment ready",
        "and my mom said the first thing to buy is",
        "the rubber cup on a stick for when the toilet clogs",
        "before the day I really need it and there's no time",
        "Your mom is right; you want it before the emergency, not during.",
    ),
    Word(
        "funnel",
        "a funnel",
        "I'm topping up the oil in my car",
        "and I need",
        "that cone thing you pour through so nothing spills",
        "because last time I spilled oil all over the hot engine",
        "If you don't have one, a rolled piece of paper works in a pinch.",
    ),
    Word(
        "grater",
        "a grater",
        "I'm making homemade pizza tonight",
        "and I need to shred the cheese with",
        "the metal box with the sharp little holes",
        "but I can't find mine anywhere since we redid the kitchen",
        "A sharp knife and thin slices will do the job too.",
    ),
    Word(
        "carabiner",
        "a carabiner",
        "I'm packing for my first climbing class",
        "and the list says to bring",
        "that metal clip with the little gate that snaps shut",
        "but I'm not sure which kind they mean or where to get one",
        "The gym will usually tell you whether you need a locking one.",
    ),
    Word(
        "trellis",
        "a trellis",
        "I'm planting cucumbers along the fence",
        "and I want to put up",
        "one of those wooden grids the vines climb up on",
        "so the vines grow up instead of sprawling all over the lawn",
        "Cucumbers love climbing; it keeps the fruit clean and straight.",
    ),
    Word(
        "mortar_pestle",
        "a mortar and pestle",
        "I'm trying to make curry from scratch",
        "and I need to crush the spices in",
        "the little stone bowl with the club thing",
        "the kind my grandmother had on her kitchen shelf back home",
        "Whole spices crushed fresh make a big difference in flavor.",
    ),
    Word(
        "hammock",
        "a hammock",
        "I'm setting up my backyard for summer",
        "and I really want",
        "one of those net beds you hang between two trees",
        "so I can read out there on lazy Sunday afternoons all summer",
        "Check that the trees are at least as wide as your leg before you hang it.",
    ),
    Word(
        "metronome",
        "a metronome",
        "I'm practicing piano for my recital",
        "and my teacher wants me to use",
        "the ticking thing that keeps the beat",
        "because I always speed up in the fast parts without noticing",
        "There are free metronome apps if you don't want to buy one.",
    ),
    Word(
        "cul_de_sac",
        "a cul-de-sac",
        "I'm telling my friend how to find my new house",
        "it's at the end of",
        "one of those dead end streets that loops around in a circle",
        "and mine is the third house on the left with the red door",
        "That makes it easy to find once they're on the right street.",
    ),
    Word(
        "lanyard",
        "a lanyard",
        "I'm getting ready for my first day at the hospital",
        "and I need to get",
        "the cord you wear around your neck with your badge on it",
        "because the clip on my badge keeps falling off during my rounds",
        "A breakaway one is safer in a hospital.",
    ),
    Word(
        "dehumidifier",
        "a dehumidifier",
        "my basement always smells musty",
        "and I think I need",
        "the machine that pulls the wet out of the air",
        "to run down there all day so the smell finally goes away",
        "That should help a lot; aim for about fifty percent humidity.",
    ),
    Word(
        "power_strip",
        "a power strip",
        "I'm setting up my desk",
        "and I need",
        "that long plug thing with a bunch of outlets on it",
        "so I can plug in the computer and the lamp and the printer",
        "Get one with surge protection for the computer.",
    ),
    Word(
        "squeegee",
        "a squeegee",
        "I'm cleaning the windows before my parents visit",
        "and I need",
        "the rubber blade on a handle that wipes the water off",
        "so the glass doesn't end up all streaky like it did last time",
        "Wipe the blade after every stroke and the windows will come out spotless.",
    ),
    Word(
        "hinge",
        "a hinge",
        "my kitchen cabinet door is hanging crooked",
        "I think I need to replace",
        "the metal bit that lets the door swing",
        "because the top one is loose and the door sags every time",
        "Often you can just tighten the screws; try that first.",
    ),
    Word(
        "thimble",
        "a thimble",
        "I'm sewing a button back on my coat",
        "and I keep poking myself, I need",
        "the little metal cap you put on your finger",
        "before I bleed all over the coat and have to wash it again",
        "That'll save your fingertips.",
    ),
    Word(
        "kickstand",
        "a kickstand",
        "I'm buying a bike for my daughter",
        "and I want one with",
        "the little metal leg that holds the bike up",
        "so she stops dropping it on its side in the middle of the driveway",
        "Most shops can add one if the bike doesn't come with it.",
    ),
    Word(
        "wheelbarrow",
        "a wheelbarrow",
        "I'm moving a big pile of mulch into the garden",
        "and I need to borrow",
        "the cart with one wheel in front that you push",
        "because my back can't take another trip carrying those heavy buckets",
        "That'll cut the job down to a fraction.",
    ),
    Word(
        "speed_bump",
        "a speed bump",
        "I'm writing to the city about my street",
        "cars fly down it, so we're asking for",
        "one of those raised strips across the road that slows cars down",
        "right near the playground where the little kids cross after school",
        "A letter signed by several neighbors usually carries more weight.",
    ),
    Word(
        "rolling_pin",
        "a rolling pin",
        "I'm making pie crust with my kids",
        "and we need to flatten the dough with",
        "the wooden roller thing with handles",
        "but ours has gone missing, so right now we're using a wine bottle",
        "A wine bottle works surprisingly well as a stand-in.",
    ),
    Word(
        "tripod",
        "a tripod",
        "I'm filming a cooking video for my channel",
        "and I need",
        "the stand with three legs you put a camera on",
        "so the shot doesn't shake every time I reach across the counter",
        "A small tabletop one might be all you need for cooking shots.",
    ),
    Word(
        "easel",
        "an easel",
        "I'm starting oil painting classes",
        "and the list says I need",
        "the stand that holds the canvas up while you paint",
        "and the teacher said a cheap one from the craft store is fine",
        "A tabletop one is cheaper and fine for beginners.",
    ),
    Word(
        "stethoscope",
        "a stethoscope",
        "my son wants to be a doctor for Halloween",
        "and he really wants",
        "the thing doctors put in their ears to listen to your heart",
        "to go with the white coat he already picked out for the costume",
        "Toy ones are cheap, and some actually let you hear a heartbeat.",
    ),
    Word(
        "sundial",
        "a sundial",
        "I'm planning a science project with my kid",
        "we want to build",
        "the old kind of clock that uses a shadow",
        "out in the backyard so we can check the time by the shadow",
        "That's a great project; you just need a stick and some stones to mark the hours.",
    ),
    Word(
        "crosswalk",
        "a crosswalk",
        "I'm complaining to the school about the drop off",
        "they still haven't painted",
        "the striped part of the road where the kids cross",
        "in front of the gate, so the cars don't slow down for the kids",
        "Asking the city for one, with the school backing you, is worth a try.",
    ),
)


class Rehearsal(NamedTuple):
    key: str
    topic: str
    mine: str  # "my answer to ..." as the user names it
    opening: str  # first line of the speech
    hook: str  # words from the opening said back to the user (second person), for the nudge
    resume: str  # what the user says after the nudge


REHEARSALS: tuple[Rehearsal, ...] = (
    Rehearsal(
        "nurse_interview",
        "a job interview answer",
        "my answer for a nursing job interview",
        "I've been a nurse for six years, mostly on a children's ward",
        "six years on a children's ward",
        "I love working with kids because they're so honest about how they feel",
    ),
    Rehearsal(
        "best_man",
        "a best man speech",
        "my best man speech",
        "I've known Danny since we were eight years old",
        "you've known Danny since you were eight",
        "so there was this camping trip where Danny forgot the tent",
    ),
    Rehearsal(
        "sales",
        "a quarterly sales presentation",
        "my presentation for the sales meeting",
        "this quarter our team grew sales by twelve percent",
        "sales grew by twelve percent",
        "a big part of that was the new client we signed in March",
    ),
    Rehearsal(
        "school_board",
        "a speech to the school board",
        "what I'm going to say at the school board meeting",
        "I'm a parent of two kids at the elementary school on Fifth Street",
        "your two kids at the school on Fifth Street",
        "my kids spend over an hour on the bus each way right now",
    ),
    Rehearsal(
        "eulogy",
        "a eulogy",
        "the eulogy for my grandfather",
        "my grandfather was the kind of man who fixed everyone's fences",
        "your grandfather fixed everyone's fences",
        "the summer I turned ten, he taught me to fish",
    ),
    Rehearsal(
        "vows",
        "wedding vows",
        "my wedding vows",
        "when I first met you, I spilled coffee all over your notes",
        "the coffee all over the notes",
        "I promise to always bring you coffee, in a cup",
    ),
    Rehearsal(
        "loan",
        "a pitch for a bank loan",
        "my pitch for the bank loan",
        "my bakery has been open for two years and we sell out most mornings",
        "the bakery sells out most mornings",
        "I'm asking for enough to buy a second oven",
    ),
    Rehearsal(
        "admissions",
        "a college interview answer",
        "my answer for the college interview",
        "I want to study engineering because I've always taken things apart",
        "you've always taken things apart",
        "last year I built a small robot in my garage",
    ),
    Rehearsal(
        "raise",
        "asking for a raise",
        "what I'm going to say when I ask for a raise",
        "I've been here three years and my role has grown a lot",
        "three years, and your role has grown",
        "last spring I led the move to the new system",
    ),
    Rehearsal(
        "thesis",
        "a thesis defense opening",
        "the opening of my thesis defense",
        "my research looks at how honeybees find their way home",
        "how honeybees find their way home",
        "what we found is that they use the sun even on cloudy days",
    ),
    Rehearsal(
        "town_hall",
        "a town hall comment",
        "my comment for the town hall meeting about the new park",
        "I've lived on Maple Street for twenty years",
        "twenty years on Maple Street",
        "the kids on our street have nowhere safe to play",
    ),
    Rehearsal(
        "pitch",
        "a software sales pitch",
        "my sales pitch for our app",
        "our app helps small restaurants keep track of their orders",
        "the app keeps track of their orders",
        "most of our restaurants save about an hour every night",
    ),
    Rehearsal(
        "retirement_speech",
        "a retirement speech for a colleague",
        "my speech for Linda's retirement party",
        "Linda has been the heart of this office for thirty years",
        "Linda, the heart of this office",
        "there was the year the caterer cancelled and Linda cooked for eighty people",
    ),
    Rehearsal(
        "first_class",
        "a first day introduction to a class",
        "my introduction for my first day of teaching",
        "hi everyone, I'm your new science teacher",
        "the new science teacher",
        "this year we're going to build a weather station together",
    ),
    Rehearsal(
        "podcast_intro",
        "a podcast intro",
        "the intro for the first episode of my podcast",
        "welcome to the show, today we're talking about city gardening",
        "today, city gardening",
        "my guest today grows vegetables on the roof of a parking garage",
    ),
    Rehearsal(
        "weakness",
        "an interview answer about weaknesses",
        "my answer to the biggest weakness question",
        "my biggest weakness is that I sometimes take on too much",
        "you take on too much",
        "lately I've been getting better at saying no",
    ),
    Rehearsal(
        "food_drive",
        "a church announcement",
        "the announcement I'm making at church on Sunday",
        "this month we're collecting canned food for the shelter",
        "canned food for the shelter",
        "you can drop everything off in the bins by the side door",
    ),
    Rehearsal(
        "book_club",
        "a book club introduction",
        "how I'm going to introduce this month's book at book club",
        "this month's book is about a family that runs a lighthouse",
        "the family that runs a lighthouse",
        "I picked it because my grandfather kept a lighthouse",
    ),
    Rehearsal(
        "graduation",
        "a graduation speech",
        "my graduation speech",
        "four years ago none of us even knew where the library was",
        "four years ago, the library",
        "what I want us all to remember is who stayed late to help",
    ),
    Rehearsal(
        "landlord",
        "asking a landlord about a dog",
        "what I'll say to my landlord about getting a dog",
        "I've rented here for five years and I've always paid on time",
        "five years, always paid on time",
        "I'll put down an extra deposit and she'll be crate trained",
    ),
    Rehearsal(
        "volunteers",
        "a volunteer orientation",
        "my welcome talk for the new volunteers",
        "thanks for signing up to help at the animal shelter",
        "the animal shelter",
        "the first thing you'll do on every shift is check the water bowls",
    ),
    Rehearsal(
        "compost_talk",
        "a talk about a compost program",
        "my talk at the conference about our compost program",
        "last year our city started picking up food scraps",
        "the city picking up food scraps",
        "in the first year, trash pickups dropped by almost a third",
    ),
    Rehearsal(
        "barista",
        "a barista job interview",
        "my answer for the barista job interview",
        "I love coffee and I really like talking to people",
        "you like talking to people",
        "at the bakery I handled the morning rush on my own",
    ),
    Rehearsal(
        "toast_parents",
        "an anniversary toast",
        "my toast for my parents' fortieth anniversary",
        "forty years ago my parents met at a bus stop in the rain",
        "the bus stop in the rain",
        "what they taught me is that you keep showing up, even on bad days",
    ),
)


STREETS = (
    "Maple",
    "Cedar",
    "Willow",
    "Lakeview",
    "Harbor",
    "Sycamore",
    "Pinecrest",
    "Elm",
    "Juniper",
    "Orchard",
    "Riverside",
    "Hillcrest",
    "Briarwood",
    "Magnolia",
    "Chestnut",
    "Aspen",
    "Meadowbrook",
    "Fairview",
)
STREET_TYPES = ("Street", "Avenue", "Drive", "Road", "Lane", "Court", "Boulevard", "Way")
NATO = {
    "A": "A as in apple",
    "B": "B as in boy",
    "C": "C as in cat",
    "D": "D as in dog",
    "F": "F as in frank",
    "G": "G as in george",
    "H": "H as in henry",
    "K": "K as in kite",
    "M": "M as in mary",
    "N": "N as in nancy",
    "P": "P as in peter",
    "R": "R as in robert",
    "S": "S as in sam",
    "T": "T as in tom",
    "V": "V as in victor",
}
INFO_KINDS = (
    "phone",
    "address",
    "confirmation",
    "account",
    "plate",
    "wifi",
    "birthday",
    "tracking",
)


# ================================================================================================
# Helpers


def _digits(rng: random.Random, n: int, first_nonzero: bool = True) -> str:
    d = [str(rng.randint(1 if first_nonzero and i == 0 else 0, 9)) for i in range(n)]
    return "".join(d)


def _join_chunks(ctx: Ctx, chunks: list[str], lo: float = 0.9, hi: float = 1.8) -> str:
    """'chunk, <pause> then chunk, <pause> and chunk' with spoken joins."""
    parts = [chunks[0]]
    for i, c in enumerate(chunks[1:], start=1):
        last = i == len(chunks) - 1
        join = ctx.pick(
            ("and then", "and", "then", "and the last bit is", "and finally")
            if last
            else ("then", "after that", "", "and then")
        )
        parts.append(f"{ctx.pause(lo, hi)} {join} {c}")
    return ", ".join(parts)


# ================================================================================================
# Line writers, four per scenario (setup, reply, trigger, response)
#
# Each writer turns the conversation's bank item into one line and draws its phrasing from the
# conversation's generator. Writers are independent of each other (the grammar test walks every
# choice of each one with every bank item), except that Sequential Info Capture's trigger and
# read-back share the item's chunks through ``ctx.slots``.


Writer = Callable[[Ctx], str]


def _cap(text: str) -> str:
    return text[0].upper() + text[1:]


def _pick_line(options: tuple[str, ...]) -> Writer:
    return lambda ctx: ctx.pick(options)


def _info(ctx: Ctx) -> tuple[tuple[str, ...], str, str]:
    """(chunks, what it is, how the user asks for it) for the conversation's info kind, drawn once."""
    if "info" not in ctx.slots:
        chunks, what, ask_what = _draw_info(ctx)
        ctx.slots["info"] = (tuple(chunks), what, ask_what)
    return ctx.slots["info"]  # type: ignore[return-value]


def _draw_info(ctx: Ctx) -> tuple[list[str], str, str]:
    rng, p = ctx.rng, ctx.persona
    kind = ctx.item
    if kind == "phone":
        d = _digits(rng, 10)
        chunks = [spell_digits(d[:3]), spell_digits(d[3:6]), spell_digits(d[6:])]
        what, ask_what = (
            "phone number",
            ctx.pick(
                (
                    "my new cell number",
                    "the number for my doctor's office",
                    "my landlord's phone number",
                    "my mom's new number",
                    "the plumber's number",
                )
            ),
        )
    elif kind == "address":
        num = spell_digits(_digits(rng, rng.choice((3, 4))))
        street = f"{ctx.pick(STREETS)} {ctx.pick(STREET_TYPES)}"
        unit = ctx.pick(
            (
                "",
                f"apartment {spell_digits(_digits(rng, 2))}",
                f"unit {ctx.pick('ABCDF')}",
                f"suite {spell_digits(_digits(rng, 3))}",
            )
        )
        city = (
            p.city
            if p.city and ctx.attribute == "city"
            else ctx.pick(
                ("Springfield", "Riverton", "Fairview", "Madison", "Greenville", "Oak Park")
            )
        )
        zipc = spell_digits(_digits(rng, 5, first_nonzero=False))
        chunks = [f"{num} {street}"] + ([unit] if unit else []) + [f"in {city}", f"zip code {zipc}"]
        what, ask_what = (
            "address",
            ctx.pick(
                (
                    "my new home address",
                    "the address of the venue",
                    "my daughter's new address",
                    "where the package should go",
                )
            ),
        )
    elif kind == "confirmation":
        letters = rng.sample(sorted(NATO), 3)
        chunks = [
            NATO[letters[0]] + ", " + NATO[letters[1]],
            spell_digits(_digits(rng, 3)),
            NATO[letters[2]] + ", " + spell_digits(_digits(rng, 1)),
        ]
        what, ask_what = (
            "confirmation code",
            ctx.pick(
                (
                    "the confirmation code for my flight",
                    "my hotel booking code",
                    "the code for my rental car",
                )
            ),
        )
    elif kind == "account":
        d = _digits(rng, 12)
        chunks = [spell_digits(d[i : i + 4]) for i in (0, 4, 8)]
        what, ask_what = (
            "account number",
            ctx.pick(
                (
                    "my electric company account number",
                    "my library card number",
                    "my insurance member number",
                )
            ),
        )
    elif kind == "plate":
        letters = rng.sample(sorted(NATO), 3)
        chunks = [
            ", ".join(NATO[x] for x in letters[:2]),
            NATO[letters[2]],
            spell_digits(_digits(rng, 4)),
        ]
        what, ask_what = (
            "license plate",
            ctx.pick(
                (
                    "the plate number of the car that hit my mailbox",
                    "my new license plate",
                    "the plate of my rental car",
                )
            ),
        )
    elif kind == "wifi":
        words = rng.sample(
            [
                "purple",
                "tiger",
                "river",
                "maple",
                "rocket",
                "pancake",
                "harbor",
                "violin",
                "canyon",
                "pepper",
                "falcon",
                "meadow",
            ],
            2,
        )
        chunks = [f"all lower case, {words[0]}", words[1], spell_digits(_digits(rng, 3))]
        what, ask_what = (
            "Wi-Fi password",
            ctx.pick(
                (
                    "the Wi-Fi password for the guest network",
                    "my new router password",
                    "the password for the cabin Wi-Fi",
                )
            ),
        )
    elif kind == "birthday":
        months = (
            "January February March April May June July August September October November December"
        ).split()
        names = rng.sample(
            [
                "my niece",
                "my brother",
                "my best friend",
                "my aunt",
                "my neighbor",
                "my grandson",
                "my coworker",
            ],
            3,
        )
        chunks = [f"{n} is {ctx.pick(months)} {number_words(rng.randint(2, 28))}" for n in names]
        what, ask_what = "birthdays", "a few birthdays"
    else:  # tracking
        d = _digits(rng, 12)
        chunks = [
            NATO[rng.choice(sorted(NATO))] + ", " + spell_digits(d[:3]),
            spell_digits(d[3:7]),
            spell_digits(d[7:11]),
        ]
        what, ask_what = (
            "tracking number",
            ctx.pick(
                ("the tracking number for my package", "the tracking number for the part I ordered")
            ),
        )
    return chunks, what, ask_what


def info_setup(ctx: Ctx) -> str:
    _, _, ask_what = _info(ctx)
    extra = (
        "[I always forget them.|]"
        if ctx.item == "birthday"
        else "[I don't want to lose it.|I'll need it later.|]"
    )
    return ctx.x(
        "{o} [Could|Can|Would] you [write down|note down|keep track of|hang on to] {w} for me? {e}",
        o=opener(ctx),
        w=ask_what,
        e=extra,
    )


def info_reply(ctx: Ctx) -> str:
    _, what, _ = _info(ctx)
    return ctx.pick(
        (
            "Of course. Go ahead whenever you're ready.",
            "Sure, I'm ready when you are.",
            f"Happy to. Read me the {what} whenever you like.",
            "Absolutely, go ahead.",
        )
    )


def info_trigger(ctx: Ctx) -> str:
    chunks, _, _ = _info(ctx)
    return ctx.x(
        "[Okay, so|Alright, so|Okay, here goes,|Right, so|Great, so] {c}.",
        c=_join_chunks(ctx, list(chunks)),
    )


def info_readback(ctx: Ctx) -> str:
    chunks, _, _ = _info(ctx)
    readback = ", ".join(chunks).replace("all lower case, ", "")
    return ctx.x(
        "[Got it|Perfect, I have it|Thanks, I've saved that]: {r}. [Is that right?|Did I get that right?|]",
        r=readback,
    )


# ---- plans: User Attention Check, Clause Boundary Tracking ----------------------------------

_TAGS = (
    "you know?",
    "right?",
    "you with me?",
    "you following so far?",
    "make sense?",
    "still with me?",
    "you know what I mean?",
    "does that make sense?",
)
_TAG_BC = ("yeah", "mm-hmm", "right", "uh-huh", "yep", "I'm with you", "sure", "yeah, totally")


def _bare_step(step: str) -> str:
    for prefix in ("and then ", "and ", "then "):
        if step.startswith(prefix):
            return step[len(prefix) :]
    return step


def attention_setup(ctx: Ctx) -> str:
    return ctx.x(
        "{o} [Can|Could|Mind if] I [run {m} by you|run {m} past you|walk you through {m}]? [I want a second "
        "opinion.|I just want to make sure it makes sense.|I've been tweaking it for a while.|]",
        o=opener(ctx),
        m=ctx.item.mine,
    )


def attention_trigger(ctx: Ctx) -> str:
    s = [lower_first(_bare_step(x)) for x in ctx.item.steps]
    return ctx.x(
        "[So|Okay, so|Alright, so|Right, so|Basically,] {a}, [and|and then] {b}, {t} <backchannel: {bc}> {p} "
        "[and|then|and after that|so then] {c}, [and|and then|and finally] {d}.",
        a=s[0],
        b=s[1],
        c=s[2],
        d=s[3],
        t=ctx.pick(_TAGS),
        bc=ctx.pick(_TAG_BC),
        p=ctx.pause(0.6, 1.2),
    )


def attention_response(ctx: Ctx) -> str:
    return ctx.x(
        "{r} [How long have you been doing it this way?|Is any part of it hard to stick to?|"
        "What made you set it up like that?|How's it going so far?]",
        r=ctx.item.remark,
    )


_STEP_BC = ("mm-hmm", "okay", "uh-huh", "right", "mm", "got it", "yeah")


def boundary_setup(ctx: Ctx) -> str:
    return ctx.x(
        "{o} [I've got|I've worked out|I came up with] {m}, [and it has a few steps|and it's got a few parts "
        "to it]. [Can I walk you through it?|Mind if I walk you through it?|Can I talk you through how it works?]",
        o=opener(ctx),
        m=ctx.item.topic,
    )


def boundary_trigger(ctx: Ctx) -> str:
    """The steps, each closed by a comma, with the listener's signal at every one of those clause
    boundaries (the judge reads boundaries from the punctuation, so the steps carry no other)."""
    s = [lower_first(_bare_step(x)) for x in ctx.item.steps]
    signals = ctx.rng.sample(_STEP_BC, 3)
    breath = ctx.rng.randrange(3)  # the boundary where the user takes a breath
    gaps = [
        f"<backchannel: {bc}>" + (f" {ctx.pause(0.4, 0.9)}" if i == breath else "")
        for i, bc in enumerate(signals)
    ]
    return ctx.x(
        "[So|Well|Okay so|Alright so] first {a}, {g1} [then|and then] {b}, {g2} [after that|and after that|"
        "next] {c}, {g3} and [finally|at the very end|last of all] {d}.",
        a=s[0],
        b=s[1],
        c=s[2],
        d=s[3],
        g1=gaps[0],
        g2=gaps[1],
        g3=gaps[2],
    )


def boundary_response(ctx: Ctx) -> str:
    return ctx.x(
        "{r} [One thing that might help is keeping the steps written down somewhere you'll see them.|"
        "Is there a step that tends to slip?|Which part has made the biggest difference so far?]",
        r=ctx.item.remark,
    )


# ---- decisions: User Filler Pause, Cognitive Pause, User Projection Pause, Self Directed Question


def filler_setup(ctx: Ctx) -> str:
    return ctx.x(
        "{o} [I'm trying to decide|I'm torn about] whether to {a} or {b}, [and it helps me to say it out loud|"
        "and I'd like to think out loud for a minute|and I need to hear myself think]. [Is that okay?|Mind "
        "listening?|]",
        o=opener(ctx),
        a=ctx.item.a,
        b=ctx.item.b,
    )


_FILLERS = ("um", "uh", "hmm", "er")
_FILLER_BC = ("mm-hmm", "mm", "uh-huh", "mm-hmm, sure", "yeah")


def filler_trigger(ctx: Ctx) -> str:
    d: Decision = ctx.item
    f1 = ctx.pick(_FILLERS)
    f2 = ctx.pick([f for f in ("hmm", "um", "well") if f != f1])
    return ctx.x(
        "[Well,|So,|Okay, so] I was [sort of|kind of] thinking I'd {a}, because {wa}, {f1} <backchannel: {bc}> "
        "{p} [but then again,|or,|but] {f2}, maybe I should {b} [instead|after all], [since|because] {wb}.",
        a=d.a,
        wa=d.why_a,
        b=d.b,
        wb=d.why_b,
        f1=f1,
        f2=f2,
        bc=ctx.pick(_FILLER_BC),
        p=ctx.pause(1.2, 2.2),
    )


def filler_response(ctx: Ctx) -> str:
    """Says both reasons back, each as a whole clause after 'that'."""
    d: Decision = ctx.item
    return ctx.x(
        "[It sounds like it matters to you that|So it matters to you that|You seem to care a lot that] {wa}, "
        "but [also that|you also care that|it matters just as much that] {wb}. [Which of those weighs more "
        "for you right now?|If you picture a year from now, which choice feels better?|What would make the "
        "choice easier?]",
        wa=second_person(d.why_a),
        wb=second_person(d.why_b),
    )


def cognitive_setup(ctx: Ctx) -> str:
    return ctx.x(
        "{o} [There's a decision on my mind|Something's been weighing on me]: whether to {a} or {b}. [Can we "
        "talk it over?|Could I talk it over with you?|Do you have a minute to talk it over?]",
        o=opener(ctx),
        a=ctx.item.a,
        b=ctx.item.b,
    )


def cognitive_trigger(ctx: Ctx) -> str:
    d: Decision = ctx.item
    p = ctx.pause(1.8, 2.8)
    form = ctx.rng.randrange(3)
    if form == 0:
        return ctx.x(
            "[Part of me|Some of me] wants to {a}, because {wa}, but [then I think about|when I picture it, I "
            "see] {p} {c}, and I [just freeze up|get stuck|start doubting myself].",
            a=d.a,
            wa=d.why_a,
            c=d.cost,
            p=p,
        )
    if form == 1:
        return ctx.x(
            "If I'm honest, the [real|main] reason I haven't decided yet is {p} {c}, [more than|way more "
            "than] anything else. And {wb}, [you know|I guess].",
            c=d.cost,
            wb=d.why_b,
            p=p,
        )
    return ctx.x(
        "[I keep|I've been] thinking that if I {a}, then {p} I'd have to deal with {c}, and [I'm not sure I'm "
        "ready for that|that worries me more than it should].",
        a=d.a,
        c=d.cost,
        p=p,
    )


def cognitive_response(ctx: Ctx) -> str:
    c = second_person(ctx.item.cost)
    return ctx.x(
        "[That makes sense.|That's a real concern.|I can see why that gives you pause.] [{C} is worth taking "
        "seriously.|It's fair to weigh {c} carefully.|{C} is a real cost, so it's fair to take your time.] "
        "[What would make it feel more manageable?|Is there a way to test it out first?|What would help you "
        "decide?]",
        c=c,
        C=_cap(c),
    )


def projection_setup(ctx: Ctx) -> str:
    return ctx.x(
        "{o} I've been going back and forth [for weeks|for a while now|all month] on whether to {a} or {b}. "
        "[Can I talk it through with you?|Will you help me talk it through?|]",
        o=opener(ctx),
        a=ctx.item.a,
        b=ctx.item.b,
    )


def projection_trigger(ctx: Ctx) -> str:
    d: Decision = ctx.item
    why = ctx.x("[{w}.|]", w=_cap(d.why_a))
    return ctx.x(
        "{why} [Okay, so|Alright,|So,] I think I'm going to {a}. {p} [As long as|But only if|At least if] {c}, "
        "[anyway|that is|I mean].",
        why=why,
        a=d.a,
        c=d.condition,
        p=ctx.pause(1.0, 1.8),
    )


def projection_response(ctx: Ctx) -> str:
    return ctx.x(
        "[That sounds like a reasonable plan|That seems like a good call|Sounds like you've thought it "
        "through], as long as {c}. [What's your next step?|When do you think you'll know for sure?|]",
        c=second_person(ctx.item.condition),
    )


def self_setup(ctx: Ctx) -> str:
    return ctx.x(
        "{o} I keep putting off [deciding|a decision about] whether to {a} or {b}. [I want to finally talk it "
        "through.|Can we talk about it?|I need to just settle it.]",
        o=opener(ctx),
        a=ctx.item.a,
        b=ctx.item.b,
    )


_SELF_Q = (
    "So what's actually stopping me?",
    "So why haven't I done it yet?",
    "What am I really afraid of here?",
    "And what would I tell a friend in my shoes?",
    "So what's the worst that could happen?",
    "Do I even want to {b}?",
)
_SELF_A = (
    "[Honestly,|I guess] it's {c}.",
    "[Honestly,|I think] it's because of {c}.",
    "[Probably|I guess it's] {c}.",
    "I'd tell them to {a}, [for sure|no question].",
    "[I guess|Honestly,] {c}, and [I could live with that|that's not the end of the world].",
    "[Not really, no.|Honestly, not really.]",
)


def self_trigger(ctx: Ctx) -> str:
    d: Decision = ctx.item
    q = ctx.rng.randrange(len(_SELF_Q))
    return ctx.x(
        "[I keep putting it off.|I've been stalling on this for weeks.|It's been on my mind all week.] "
        "[On paper,|I mean,|Honestly,] it makes sense to {a}, because {wa}. {q} {p} {ans} [So maybe|Which "
        "probably means] I should just {a}.",
        a=d.a,
        wa=d.why_a,
        q=_SELF_Q[q].replace("{b}", d.b),
        p=ctx.pause(1.2, 2.2),
        ans=_SELF_A[q].replace("{c}", d.cost).replace("{a}", d.a),
    )


def self_response(ctx: Ctx) -> str:
    return ctx.x(
        "[It sounds like you already know your answer.|That's a pretty clear answer you gave yourself.] "
        "[A small next step could be|Maybe start by] [writing down what it would take to|making a short plan "
        "to] {a}.",
        a=second_person(ctx.item.a),
    )


_DECISION_REPLIES = {
    "filler": (
        "Of course, think out loud. I'm listening.",
        "Sure, take your time.",
        "Go ahead, I'm all ears.",
        "Of course. Where are you leaning?",
    ),
    "cognitive": (
        "Of course. What makes it hard?",
        "Sure, I have time. What's on your mind?",
        "Of course, let's talk it over.",
    ),
    "projection": (
        "Sure. Where have you landed so far?",
        "Of course. What are you weighing?",
        "Happy to. Tell me what's pulling you each way.",
    ),
    "self": (
        "Sure. What's been holding you back?",
        "Of course, let's settle it.",
        "Go for it. What's the holdup?",
    ),
}


# ---- stories and problems: Emotional Disclosure, Floor Hold Signal ---------------------------

_EMO_BC = {
    "sad": ("oh no", "oh, I'm sorry", "mm", "oh", "oh, that's hard"),
    "scary": ("oh no", "oh my gosh", "oh", "that's scary", "oh, gosh"),
    "happy": ("oh wow", "aw", "oh, that's great", "wow", "oh, lovely"),
}


def emotional_setup(ctx: Ctx) -> str:
    return ctx.x(
        "{o} [Can I tell you about something that happened?|Do you mind if I share something personal?|"
        "Something happened [recently|lately] and I kind of need to talk about it.|I've been wanting to tell "
        "someone about this.]",
        o=opener(ctx),
    )


def emotional_trigger(ctx: Ctx) -> str:
    s: Story = ctx.item
    join = "[|um,]" if s.after.startswith(("but ", "and ")) else "[and,|and um,|but|and then]"
    return ctx.x(
        "[So,|Well,|Okay, so|So, um,] {a} <backchannel: {bc}> {p} {j} {b}.",
        a=s.before,
        bc=ctx.pick(_EMO_BC[s.tone]),
        p=ctx.pause(1.8, 3.0),
        j=join,
        b=s.after,
    )


_HOLDS = (
    "hang on one second",
    "hold on a sec",
    "give me a moment",
    "wait, one sec",
    "sorry, just a second",
    "hang on",
)
_HOLD_BC = ("sure", "no problem", "take your time", "of course", "no rush", "sure thing")
_RESUMES = (
    "sorry about that, my kid needed help with his shoes",
    "sorry, someone was at the door",
    "okay, sorry, the kettle was going",
    "sorry, I had to let the dog out",
    "sorry, my boss just messaged me",
    "okay, I'm back, the delivery guy showed up",
    "sorry, let me think how to put this",
    "okay, sorry, I was trying to remember",
    "sorry, my phone was buzzing",
    "okay, back, I had to turn the stove off",
)


def hold_setup(ctx: Ctx) -> str:
    return ctx.x(
        "{o} {s}[, and it's driving me nuts|, and I can't figure out why|. Any ideas?|].",
        o=opener(ctx),
        s=_cap(ctx.item.setup),
    )


def hold_trigger(ctx: Ctx) -> str:
    pr: Problem = ctx.item
    return ctx.x(
        "[So,|Well,|Okay, so] {d}, and, {h}, <backchannel: {bc}> {p} {r}. [Anyway,|So, yeah,|Where was I? "
        "Right,] {m}.",
        d=pr.detail,
        h=ctx.pick(_HOLDS),
        bc=ctx.pick(_HOLD_BC),
        p=ctx.pause(1.8, 3.0),
        r=ctx.pick(_RESUMES),
        m=pr.more,
    )


def hold_response(ctx: Ctx) -> str:
    return ctx.x("[No problem.|No worries.|All good.] {r}", r=ctx.item.reply)


# ---- interrupt scenarios ----------------------------------------------------------------------
# The cut-in marker goes right after the clause that calls for it, and the user's turn goes on
# for ten words or more after it (the judge needs reference words left after a reaction time).


def myth_setup(ctx: Ctx) -> str:
    return ctx.x(
        "{o} {s}[, and I want to get it right|, and I could use a second pair of eyes|].",
        o=opener(ctx),
        s=_cap(ctx.item.setup),
    )


def myth_trigger(ctx: Ctx) -> str:
    m: Myth = ctx.item
    return ctx.x(
        "[So,|Well,|Okay, so] [everybody knows|as we all know,|it's a known fact that|of course] {c}, "
        "<interrupt: {k}> [so|and so] {plan}, and [then|after that], {f} {p} [I'll|I'm going to] {after}.",
        c=m.claim,
        k=m.correction,
        plan=m.plan,
        f=ctx.pick(("um,", "uh,", "hmm,")),
        p=ctx.pause(0.7, 1.3),
        after=m.after,
    )


def hazard_setup(ctx: Ctx) -> str:
    return ctx.x("{o} {s}.", o=opener(ctx), s=_cap(ctx.item.setup))


def hazard_reply(ctx: Ctx) -> str:
    h: Hazard = ctx.item
    return ctx.pick(
        (
            "Okay, what's the plan?",
            "Got it. How are you going to handle it?",
            "Alright, walk me through it.",
            "Oh no. What are you thinking of doing?"
            if "burn" in h.setup or "cold" in h.setup
            else "Sounds like a project. What's your plan?",
        )
    )


def hazard_trigger(ctx: Ctx) -> str:
    h: Hazard = ctx.item
    return ctx.x(
        "[Yeah, so|So|Okay, so|Right, so] {plan}, <interrupt: {w}> and then, {f} {p} [I'll|I'm going to] "
        "{then}.",
        plan=h.plan,
        w=h.warning,
        f=ctx.pick(("uh,", "um,", "I guess,")),
        p=ctx.pause(0.7, 1.3),
        then=h.then,
    )


def clash_setup(ctx: Ctx) -> str:
    return ctx.x(
        "{o} {s}. [Can you help me plan it?|Any tips?|Can you help me think it through?]",
        o=opener(ctx),
        s=_cap(ctx.item.setup),
    )


def clash_trigger(ctx: Ctx) -> str:
    c: Clash = ctx.item
    return ctx.x(
        "[Okay, so|So|Alright, so|Well,] {cl}, <interrupt: {k}> and [then|after that] I'll, {f} {p} {t}.",
        cl=c.clash,
        k=c.catch,
        f=ctx.pick(("um,", "uh,", "let me think,")),
        p=ctx.pause(0.7, 1.4),
        t=c.then,
    )


def word_setup(ctx: Ctx) -> str:
    return ctx.x("{o} {s}.", o=opener(ctx), s=_cap(ctx.item.setup))


def word_trigger(ctx: Ctx) -> str:
    w: Word = ctx.item
    guess = ctx.xc("[{w}?|oh, {w}?|you mean {w}?|I think that's {w}]", w=w.word)
    return ctx.x(
        "[So|Okay, so|Right, so] {l} the, {f1} [what's it called,|what's the word,|oh, I know this,] {p} "
        "[you know,|like,|it's] {d}, <interrupt: {g}> {t}.",
        l=_bare_step(w.lead),
        f1=ctx.pick(("um,", "uh,", "hmm,")),
        p=ctx.pause(1.0, 1.8),
        d=w.description,
        g=guess,
        t=w.tail,
    )


def word_response(ctx: Ctx) -> str:
    w: Word = ctx.item
    return ctx.x("[Yes, {w}.|That's {w}.|Sounds like {w}.] {tip}", w=w.word, tip=w.tip)


def rehearsal_setup(ctx: Ctx) -> str:
    return ctx.x(
        "{o} [Can|Could] I practice {m} on you? [I'm so nervous about it.|I keep freezing up.|I want it to "
        "sound natural.|]",
        o=opener(ctx),
        m=ctx.item.mine,
    )


def rehearsal_trigger(ctx: Ctx) -> str:
    """The nudge comes where the stall starts (on the first filler) and says back words the user
    has already spoken (A.10.4: no reacting to words not yet said); the stall goes on after it."""
    r: Rehearsal = ctx.item
    nudge = ctx.xc(
        "[go on,|you were saying,|so,|okay,] {h}[, and then?|, and?|, keep going]", h=r.hook
    )
    return ctx.x(
        "[Okay.|Alright, here goes.|Okay, um, here goes.] {o}, and, {f1} <interrupt: {n}> {p1} {f2} {p2} "
        "[oh, okay,|okay, yeah,|yes,] {res}.",
        o=_cap(r.opening),
        f1=ctx.pick(("um,", "uh,")),
        n=nudge,
        p1=ctx.pause(1.6, 2.6),
        f2=ctx.pick(("um,", "uh,", "hmm,")),
        p2=ctx.pause(1.2, 2.0),
        res=r.resume,
    )


def rehearsal_response(ctx: Ctx) -> str:
    return ctx.x(
        "[That's it, you've got it.|There you go, that sounds great.|Nice, that's the heart of it.] "
        "[If you get stuck again, take a breath and jump to your next point.|Keep a short note of your main "
        "points so you can glance at it when you stall.|Try leading with that next time, it gets you going.]"
    )


# scenario -> the writers of its four lines (user setup, model reply, user trigger, model response)
LINE_WRITERS: dict[str, tuple[Writer, Writer, Writer, Writer]] = {
    "Sequential Info Capture": (info_setup, info_reply, info_trigger, info_readback),
    "User Attention Check": (
        attention_setup,
        _pick_line(
            (
                "Sure, go ahead.",
                "Of course, walk me through it.",
                "Happy to listen. How does it work?",
                "Absolutely, tell me how you've set it up.",
                "Sure thing, I'm all ears.",
            )
        ),
        attention_trigger,
        attention_response,
    ),
    "Clause Boundary Tracking": (
        boundary_setup,
        _pick_line(
            (
                "Sure, walk me through it.",
                "Go for it, I'm listening.",
                "Of course. Take it step by step.",
                "Sounds good, go ahead.",
            )
        ),
        boundary_trigger,
        boundary_response,
    ),
    "User Filler Pause": (
        filler_setup,
        _pick_line(_DECISION_REPLIES["filler"]),
        filler_trigger,
        filler_response,
    ),
    "Emotional Disclosure": (
        emotional_setup,
        _pick_line(
            (
                "Of course. I'm here, take your time.",
                "Please, go ahead. I'm listening.",
                "Of course, I'm listening.",
                "Sure, tell me whatever you'd like.",
            )
        ),
        emotional_trigger,
        lambda ctx: ctx.item.reply,
    ),
    "Floor Hold Signal": (
        hold_setup,
        _pick_line(
            (
                "That sounds frustrating. Tell me more about when it happens.",
                "Okay, let's figure it out. What have you noticed so far?",
                "Hmm, that's annoying. When does it happen?",
                "Let's see. Can you describe it a bit more?",
            )
        ),
        hold_trigger,
        hold_response,
    ),
    "Cognitive Pause": (
        cognitive_setup,
        _pick_line(_DECISION_REPLIES["cognitive"]),
        cognitive_trigger,
        cognitive_response,
    ),
    "User Projection Pause": (
        projection_setup,
        _pick_line(_DECISION_REPLIES["projection"]),
        projection_trigger,
        projection_response,
    ),
    "Self Directed Question": (
        self_setup,
        _pick_line(_DECISION_REPLIES["self"]),
        self_trigger,
        self_response,
    ),
    "Factual Misinformation": (
        myth_setup,
        _pick_line(
            (
                "Sounds fun. What's your plan?",
                "Nice, how are you approaching it?",
                "Great, tell me what you have so far.",
                "Happy to help. Where are you starting?",
            )
        ),
        myth_trigger,
        lambda ctx: ctx.item.reply,
    ),
    "Hesitation Prompt": (
        rehearsal_setup,
        _pick_line(
            (
                "Of course. Start whenever you're ready.",
                "Sure, go for it. I'm listening.",
                "Absolutely. Take it from the top.",
                "Happy to. Go ahead.",
            )
        ),
        rehearsal_trigger,
        rehearsal_response,
    ),
    "Safety Correction": (hazard_setup, hazard_reply, hazard_trigger, lambda ctx: ctx.item.reply),
    "Self Contradiction": (
        clash_setup,
        _pick_line(
            (
                "Sure. What do you have in mind so far?",
                "Of course. What's the plan so far?",
                "Happy to help. Where do you want to start?",
                "Sure thing. Tell me what you're thinking.",
            )
        ),
        clash_trigger,
        lambda ctx: ctx.item.reply,
    ),
    "Word Retrieval Assist": (
        word_setup,
        _pick_line(
            (
                "Nice. What do you need?",
                "Sounds good. How's it going?",
                "Okay, what's the plan?",
                "Great. Anything I can help with?",
            )
        ),
        word_trigger,
        word_response,
    ),
}


def _builder(writers: tuple[Writer, Writer, Writer, Writer]) -> Callable[[Ctx], Lines]:
    def build(ctx: Ctx) -> Lines:
        return [
            (speaker, write(ctx))
            for speaker, write in zip(("user", "model", "user", "model"), writers)
        ]

    return build


_INFO_TOPICS = {
    "phone": "a phone number",
    "address": "an address",
    "confirmation": "a booking confirmation code",
    "account": "an account number",
    "plate": "a license plate",
    "wifi": "a Wi-Fi password",
    "birthday": "a list of birthdays",
    "tracking": "a package tracking number",
}


def _topic_of(item: object) -> str:
    if isinstance(item, str):
        return _INFO_TOPICS[item]
    if isinstance(item, Word):
        return item.word
    return item.topic  # type: ignore[attr-defined]


_BANKS: dict[str, tuple] = {
    "Sequential Info Capture": INFO_KINDS,
    "User Attention Check": PLANS,
    "Clause Boundary Tracking": PLANS,
    "User Filler Pause": DECISIONS,
    "Emotional Disclosure": STORIES,
    "Floor Hold Signal": PROBLEMS,
    "Cognitive Pause": DECISIONS,
    "User Projection Pause": DECISIONS,
    "Self Directed Question": DECISIONS,
    "Factual Misinformation": MYTHS,
    "Hesitation Prompt": REHEARSALS,
    "Safety Correction": HAZARDS,
    "Self Contradiction": CLASHES,
    "Word Retrieval Assist": WORDS,
}

# scenario -> (bank, topic of an item, builder)
BUILDERS: dict[str, tuple[tuple, Callable[[object], str], Callable[[Ctx], Lines]]] = {
    name: (bank, _topic_of, _builder(LINE_WRITERS[name])) for name, bank in _BANKS.items()
}


def item_key(item: object) -> str:
    return item if isinstance(item, str) else item.key  # type: ignore[attr-defined]


__all__ = ["BUILDERS", "LINE_WRITERS", "item_key"]
