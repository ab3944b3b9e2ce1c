"""Explanation topics for the offline responsive grammars (written for fdeval).

Each topic is something practical a user asks how to do. Besides the model's answer (a first
sentence, where the user's barge-in lands, and the rest) it carries what each responsive
scenario needs: a simpler restatement (confusion), a funny aside (amusement), a constraint, a
narrower aspect, an advanced point, a summary, a related redirect, a personal detail, and a
follow-up question -- each with the model's adapted reply. Numbers are spelled out.
"""

from __future__ import annotations

from typing import NamedTuple


class Topic(NamedTuple):
    key: str
    topic: str  # gerund phrase, "starting a sourdough starter"
    asks: tuple[str, ...]  # the user's question, a few phrasings
    lead: str  # the model's first sentence
    more: str  # the rest of the explanation
    simple: str  # the same start, said more simply
    fun: str  # an amusing aside
    constraint: tuple[str, str]  # (what the user adds, the adapted advice)
    aspect: tuple[str, str]  # (the part the user cares about, the focused answer)
    advanced: tuple[str, str]  # (the user's experience, an advanced point)
    summary: str  # the main takeaways
    redirect: tuple[str, str]  # (the related question, its answer)
    personal: tuple[str, str]  # (a personal detail, the reframed advice)
    follow: tuple[str, str]  # (a follow-up question, its answer)

    @property
    def tags(self) -> frozenset[str]:
        """Domain tags (see :func:`~fdeval.benchmarks.instructfd.personas.tags_of`): what a persona
        detail must share to be worth saying in a conversation about this topic."""
        return frozenset(TOPIC_TAGS[self.key].split())

    @property
    def expert_ask(self) -> str:
        """The question of a user who already knows the basics (nothing in it says otherwise)."""
        return EXPERT_ASKS[self.key]


TOPICS: tuple[Topic, ...] = (
    Topic(
        "sourdough",
        "starting a sourdough starter",
        (
            "How do I make a sourdough starter from scratch?",
            "What's the easiest way to get a sourdough starter going?",
        ),
        "Sure, a starter is really just flour and water that you leave out so wild yeast can move in.",
        "Mix equal weights of each in a jar, cover it loosely and keep it somewhere warm. Every day, throw out about "
        "half and feed it fresh flour and water, and in a week or so it should double after each feeding.",
        "Basically, you mix flour and water in a jar and feed it a little more every day until it gets bubbly.",
        "A lot of people name their starters, and I once heard of one called Clint Yeastwood.",
        (
            "but I only have plain white flour",
            "White flour works fine. It may take a few extra days to wake up, so "
            "keep the jar somewhere warm and be patient.",
        ),
        (
            "how often I have to feed it",
            "While it's getting established, feed it once a day. Once it's strong, you "
            "can keep it in the fridge and feed it about once a week.",
        ),
        (
            "I've kept a starter going for years",
            "Then the interesting lever is hydration and temperature: a stiffer "
            "starter kept cool gives a milder loaf, while a runny, warm one gets noticeably tangier.",
        ),
        "Flour and water, feed it daily, keep it warm, and bake once it doubles reliably.",
        (
            "what do I do with the discard I throw out?",
            "Discard is great in pancakes, crackers or waffles, so none of it has to go to waste.",
        ),
        (
            "I should mention I can't eat gluten",
            "Then use a gluten free flour like brown rice flour. The steps are "
            "the same; it just looks a little different when it's active.",
        ),
        (
            "How do I know when it's ready to bake with?",
            "When it doubles within a few hours of feeding and smells pleasantly sour, it's ready.",
        ),
    ),
    Topic(
        "balcony_tomatoes",
        "growing tomatoes on a balcony",
        (
            "How do I grow tomatoes on my balcony?",
            "Can you walk me through growing tomatoes in pots?",
        ),
        "Sure, the first thing is to find the sunniest spot you have, since tomatoes want a lot of light.",
        "Pick a deep pot with drainage holes, fill it with potting mix rather than garden soil, and plant the "
        "seedling a little deeper than it sat in its tray. Water whenever the top inch feels dry, and add a stake "
        "early so the stem has support.",
        "In short, tomatoes need lots of sun, a big pot and regular water.",
        "Some gardeners swear that talking to their tomatoes helps, which at least makes for a very polite balcony.",
        (
            "oh, but my balcony only gets about four hours of sun",
            "With four hours, go for cherry tomatoes or a "
            "compact variety; they cope better with less light than the big slicing kinds.",
        ),
        (
            "what size pot I need",
            "Aim for something that holds at least five gallons, about the size of a big "
            "bucket. Bigger pots dry out more slowly, which the plants love.",
        ),
        (
            "I've grown tomatoes in the ground for years",
            "Then the main difference in pots is feeding: containers "
            "wash nutrients out fast, so a weekly liquid tomato feed once flowers appear makes a big difference.",
        ),
        "Full sun, a big pot with drainage, steady watering and a stake.",
        (
            "actually, could I grow peppers the same way?",
            "Yes, peppers are very similar. They like the same sun and "
            "pots, and they're a bit more forgiving about uneven watering.",
        ),
        (
            "I travel for work most weeks",
            "Then set up a self watering pot or a simple drip bottle, so "
            "the plants don't dry out while you're away.",
        ),
        (
            "When should I start feeding them?",
            "Once the first flowers appear, use a tomato fertilizer every week or two.",
        ),
    ),
    Topic(
        "couch_5k",
        "training for a five k",
        (
            "How should I train for my first five k?",
            "What's a good way to get ready for a five k when I've never run?",
        ),
        "Sure, the key idea is to build up slowly by mixing running with walking.",
        "Start with three sessions a week where you jog for a minute and walk for two, about twenty minutes in "
        "total. Each week, make the jogging stretches a little longer, and within eight weeks or so you can run "
        "the whole distance.",
        "Put simply, you run a little and walk a little, and each week you run a bit more.",
        "Runners joke that the hardest part of any run is getting out the front door, and the couch puts up a strong fight.",
        (
            "oh, and I only have twenty minutes on weekdays",
            "Twenty minutes is enough. Keep the weekday sessions "
            "short and do one slightly longer run on the weekend.",
        ),
        (
            "what shoes I should get",
            "Go to a running shop if you can and try a few pairs; comfort matters more than "
            "brand. Replace them every three to five hundred miles.",
        ),
        (
            "I used to run in college",
            "Then you can skip the walk breaks early on. Add one session of short, faster "
            "intervals each week, and keep the other runs easy.",
        ),
        "Three sessions a week, mix running and walking, and run a bit more each week.",
        (
            "actually, what should I eat before a run?",
            "Something light about an hour before, like a banana or a slice of toast, and water.",
        ),
        (
            "I had knee surgery a couple of years ago",
            "Then check with your doctor first, and run on softer "
            "surfaces like a track or trail. Keep the increases extra gradual.",
        ),
        (
            "Should I run on the days in between?",
            "No, use them for rest or an easy walk so your legs can recover.",
        ),
    ),
    Topic(
        "budget",
        "making a monthly budget",
        ("How do I set up a monthly budget?", "Can you help me figure out how to start budgeting?"),
        "Sure, start by writing down exactly what comes in each month after taxes.",
        "Next, list your fixed bills like rent and insurance, then look back at a month of bank statements to see "
        "what you really spend on food and everything else. Give every dollar a job, including savings, and check "
        "in once a week.",
        "Simply put, you write down what you earn, what you spend, and make sure the second is smaller.",
        "People are often shocked by their coffee total; one person I heard about found they'd funded a small espresso bar.",
        (
            "oh, but my income changes every month",
            "Then budget from your lowest typical month, and put anything "
            "extra from better months into a buffer you can draw on later.",
        ),
        (
            "how to cut down on groceries",
            "For groceries, plan meals before you shop, buy store brands, and cook "
            "a big batch once or twice a week so less goes to waste.",
        ),
        (
            "I already track every expense",
            "Then the next step is zero based budgeting: assign every dollar before "
            "the month starts, and set up sinking funds for things like car repairs and gifts.",
        ),
        "Know your income, list your spending, plan every dollar, and review weekly.",
        (
            "actually, should I pay off debt or save first?",
            "Build a small emergency fund first, then put extra money toward high interest debt.",
        ),
        (
            "I'm supporting my mom at the moment",
            "Then make that support its own line in the budget, so it's "
            "planned rather than squeezed out of everything else.",
        ),
        (
            "Is there an app you'd recommend?",
            "Any app that links to your bank works; even a simple spreadsheet is fine if you use it.",
        ),
    ),
    Topic(
        "watering_plants",
        "watering houseplants",
        (
            "How often should I water my houseplants?",
            "What's the right way to water indoor plants?",
        ),
        "Good question, the honest answer is that it depends on the plant, but most people water too often.",
        "Push a finger about an inch into the soil; if it's dry, water thoroughly until it runs out of the bottom, "
        "then empty the saucer. In winter, plants grow slowly and need much less.",
        "The simple version: only water when the soil feels dry, and then water well.",
        "Overwatered plants are so common that some people call it loving them to death, which is a very dramatic way to describe a fern.",
        (
            "but my apartment gets really dry in winter",
            "Then group your plants together and set them on a tray of "
            "pebbles with water, which raises the humidity around them without soaking the soil.",
        ),
        (
            "just succulents really",
            "For succulents, let the soil dry out completely, then soak it. In winter, "
            "that can mean watering only once a month.",
        ),
        (
            "I've kept houseplants for a long time",
            "Then look at water quality and pot choice: some plants dislike "
            "tap water minerals, and terracotta dries much faster than plastic.",
        ),
        "Check the soil, water only when dry, water thoroughly, and ease off in winter.",
        (
            "actually, how do I repot a plant?",
            "Pick a pot just one size bigger, loosen the roots gently, and add "
            "fresh potting mix around them.",
        ),
        (
            "I have a cat who chews on everything",
            "Then stick to pet safe plants like spider plants, calatheas and "
            "Boston ferns, and keep lilies out of the house entirely.",
        ),
        (
            "What about fertilizer?",
            "Feed them lightly every month in spring and summer, and not at all in winter.",
        ),
    ),
    Topic(
        "guitar_chords",
        "learning guitar chords",
        (
            "How do I start learning chords on the guitar?",
            "What's the best way to learn my first guitar chords?",
        ),
        "Sure, start with just three easy chords, like G, C and D, because lots of songs use only those.",
        "Practice each shape slowly until every string rings clearly, then practice switching between two chords "
        "for a minute at a time. Ten or fifteen minutes every day works better than one long session a week.",
        "Simply put, learn three chords and practice switching between them a little every day.",
        "Your fingertips will hurt at first, and every guitarist has spent a week typing very gently.",
        (
            "oh, but I've only got a ukulele right now",
            "That works too. On ukulele, start with C, A minor, F and G; "
            "they're even easier and cover loads of songs.",
        ),
        (
            "how to switch chords faster",
            "For faster switches, look for a finger that stays in place between two "
            "chords and use it as an anchor, and practice the change slowly with a metronome.",
        ),
        (
            "I can already play the open chords",
            "Then move on to barre chords, starting with F, and learn the "
            "major scale shapes so you understand why the chords fit together.",
        ),
        "Three chords, slow clean shapes, daily practice and lots of switching.",
        (
            "actually, should I learn to read music?",
            "It helps, but most guitarists start with chord charts and "
            "tabs, which are much quicker to learn.",
        ),
        (
            "I have arthritis in my hands",
            "Then try lighter strings and a capo, which lowers the pressure you need, "
            "and keep sessions short.",
        ),
        (
            "How long until it stops hurting?",
            "Usually two to three weeks of regular practice until calluses form.",
        ),
    ),
    Topic(
        "leaky_faucet",
        "fixing a dripping faucet",
        ("How do I fix a dripping faucet?", "My kitchen faucet keeps dripping, how do I fix it?"),
        "Sure, first turn off the water supply under the sink so you can take the handle apart.",
        "Then plug the drain so no small parts fall in, remove the handle, and pull out the cartridge or washer. "
        "Take the old part to a hardware store, buy an exact match, and put everything back in reverse order.",
        "In simple terms: turn off the water, take the handle apart and replace the worn piece inside.",
        "A dripping faucet can waste enough water in a year to fill a bathtub dozens of times, which is a lot of very expensive tea.",
        (
            "but I don't have any tools except a screwdriver",
            "A screwdriver gets you a long way. You may need an "
            "adjustable wrench too; they're cheap, or a neighbor might lend you one.",
        ),
        (
            "how to find the right replacement part",
            "Take the old cartridge with you and look for the brand name "
            "on the faucet; hardware staff can match it in a minute.",
        ),
        (
            "I've done basic plumbing before",
            "Then check the valve seat as well: if it's pitted, a new washer "
            "won't seal for long, so reseat or replace it with a seat wrench.",
        ),
        "Water off, drain plugged, replace the worn washer or cartridge, reassemble.",
        (
            "actually, what about a running toilet?",
            "A running toilet is usually the flapper; a new one costs a few "
            "dollars and just clips on.",
        ),
        (
            "I'm renting this place",
            "Then let your landlord know first; in most places repairs like this are their "
            "job, and it's good to have it in writing.",
        ),
        (
            "How do I know if it's a washer or a cartridge?",
            "If the handle turns a full circle or more it's usually "
            "a washer; if it moves a quarter turn or lifts up, it's a cartridge.",
        ),
    ),
    Topic(
        "sleep",
        "sleeping better",
        ("How can I get better sleep?", "What can I do to sleep better at night?"),
        "Sure, the biggest thing is going to bed and getting up at the same time every day, even on weekends.",
        "Keep your bedroom cool, dark and quiet, and cut off caffeine by early afternoon. An hour before bed, dim "
        "the lights and put your phone away, and if you can't sleep after twenty minutes, get up and read until you "
        "feel drowsy.",
        "The simple version: same bedtime every day, a dark cool room, and no screens before bed.",
        "Some people count sheep, but I've heard the sheep are much better at sleeping than anyone counting them.",
        (
            "oh, but I work night shifts",
            "Then treat your morning like your evening: blackout curtains, an eye mask, "
            "and a fixed sleep window even on days off.",
        ),
        (
            "falling asleep, not staying asleep",
            "For falling asleep, try a wind down routine of about thirty "
            "minutes and a slow breathing exercise, breathing out longer than you breathe in.",
        ),
        (
            "I've read all the basic sleep hygiene stuff",
            "Then look at morning light, which sets your body clock. "
            "Ten minutes outside soon after waking can shift your sleepiness earlier.",
        ),
        "Consistent times, a dark cool room, no late caffeine, and no screens before bed.",
        (
            "actually, are naps a bad idea?",
            "Short naps under thirty minutes in the early afternoon are fine; "
            "longer or later naps can hurt your night sleep.",
        ),
        (
            "I have a newborn at home",
            "Then the goal is different: sleep when the baby sleeps, share night feeds if "
            "you can, and don't worry about perfect routines for now.",
        ),
        (
            "Does melatonin help?",
            "It can help with jet lag or shifting your schedule, but talk to a doctor before using it regularly.",
        ),
    ),
    Topic(
        "cold_brew",
        "making cold brew coffee",
        ("How do I make cold brew at home?", "What's the trick to making good cold brew coffee?"),
        "Sure, it's mostly patience: you steep coarse coffee grounds in cold water for a long time.",
        "Use about one part coffee to four parts water, stir, cover it and leave it in the fridge for twelve to "
        "eighteen hours. Then strain it through a fine sieve or a coffee filter, and dilute it with water or milk "
        "to taste.",
        "Basically, you soak coffee in cold water overnight, then strain it.",
        "It's the only drink I know where the recipe is mostly just forgetting about it.",
        (
            "oh, but I only have pre-ground coffee",
            "Pre-ground works. It may turn out a little cloudy or bitter, so "
            "steep it for closer to twelve hours and strain it twice.",
        ),
        (
            "how to make it less bitter",
            "For less bitterness, use a coarser grind, don't steep past eighteen hours, "
            "and try a medium roast instead of a dark one.",
        ),
        (
            "I already make it every week",
            "Then experiment with the ratio and dilution separately: brew a stronger "
            "concentrate and dilute each glass, so you can tune strength without rebrewing.",
        ),
        "Coarse coffee, cold water, twelve to eighteen hours, strain, dilute.",
        (
            "actually, how is that different from iced coffee?",
            "Iced coffee is brewed hot and cooled down, so it's "
            "brighter and more acidic; cold brew is smoother.",
        ),
        (
            "I'm trying to cut down on caffeine",
            "Then use decaf beans or a half and half blend; cold brew tastes great with decaf.",
        ),
        ("How long does it keep?", "The concentrate keeps about a week in the fridge."),
    ),
    Topic(
        "paint_room",
        "painting a room",
        ("How do I paint a room myself?", "What's the right way to paint my bedroom?"),
        "Sure, most of a good paint job is preparation, so start by clearing the room and cleaning the walls.",
        "Fill any holes, sand them smooth, and tape the edges along the ceiling and trim. Cut in around the edges "
        "with a brush, then roll the walls in overlapping sections, and plan on two coats.",
        "In short: clean and tape first, then brush the edges and roll the rest, twice.",
        "Someone once told me painting is ten percent painting and ninety percent looking for the lid of the paint can.",
        (
            "oh, but I only have one afternoon",
            "With one afternoon, pick a paint with primer built in, skip the "
            "ceiling, and focus on one coat done neatly; you can add the second later.",
        ),
        (
            "how to get clean edges",
            "For clean edges, press the tape down firmly, paint over it, and pull it off "
            "while the paint is still a little wet, at an angle.",
        ),
        (
            "I've painted plenty of rooms",
            "Then upgrade your tools: a good angled brush and an extension pole make "
            "cutting in faster, and boxing the paint from several cans keeps the color even.",
        ),
        "Prep well, tape the edges, cut in, roll, and do two coats.",
        (
            "actually, how do I pick a paint finish?",
            "Flat hides flaws on walls, eggshell is easier to clean, and "
            "semi gloss is best for trim and bathrooms.",
        ),
        (
            "I have asthma",
            "Then choose a low odor, zero V O C paint, keep the windows open with a fan blowing "
            "out, and let someone else do the sanding.",
        ),
        ("How long between coats?", "Usually about two to four hours, but check the can."),
    ),
    Topic(
        "interview_prep",
        "preparing for a job interview",
        (
            "How should I prepare for a job interview?",
            "I have a job interview next week, how do I get ready?",
        ),
        "Sure, start by reading the job description closely and picking out the three things they care about most.",
        "For each of those, prepare a short story from your experience: the situation, what you did and how it "
        "turned out. Research the company, prepare two questions to ask them, and practice out loud at least once.",
        "Simply put: figure out what they want, and have a short example ready for each thing.",
        "Practicing in front of a mirror helps, though your reflection is a famously easy interviewer.",
        (
            "oh, and it's a video interview",
            "For video, test your camera and sound the day before, put the camera "
            "at eye level, and sit facing a window for good light.",
        ),
        (
            "the salary part",
            "For salary, research the typical range for the role first, give a range rather than "
            "a single number, and let them make the first offer if you can.",
        ),
        (
            "I've done plenty of interviews",
            "Then focus on the close: end with a short summary of why you fit, and "
            "ask what would make someone excellent in the role in the first six months.",
        ),
        "Know what they want, prepare short stories, research them, and practice out loud.",
        (
            "actually, what should I wear?",
            "Dress one step more formal than people at the company usually dress.",
        ),
        (
            "I have a stutter",
            "Then it's fine to pause and take your time; you can mention it briefly at the start "
            "if that makes you more comfortable, and practice your stories until they feel familiar.",
        ),
        ("Should I send a thank you note?", "Yes, a short email within a day is a nice touch."),
    ),
    Topic(
        "composting",
        "composting at home",
        ("How do I start composting at home?", "What do I need to know to start a compost pile?"),
        "Sure, composting is about mixing green stuff like food scraps with brown stuff like dry leaves.",
        "Aim for roughly two or three times as much brown as green, keep the pile about as damp as a wrung out "
        "sponge, and turn it every week or two to let air in. In a few months the bottom turns into dark, crumbly "
        "soil.",
        "Basically, you pile up food scraps and dry leaves, keep it damp, and stir it now and then.",
        "A well working compost pile can get hot enough to steam in winter, which makes it the coziest place in the garden.",
        (
            "oh, but I live in an apartment with no yard",
            "Then look at a small worm bin under the sink, or a bokashi "
            "bucket; both work indoors without smells when they're set up right.",
        ),
        (
            "what can't go in it",
            "Leave out meat, fish, dairy and oily food, plus pet waste and diseased plants; "
            "they smell or attract pests.",
        ),
        (
            "I've composted for years",
            "Then try hot composting: build a big pile all at once, keep it near one part "
            "green to two parts brown, and monitor it to keep it hot enough to kill weed seeds.",
        ),
        "Mix greens and browns, keep it damp, turn it, wait a few months.",
        (
            "actually, what about worm bins?",
            "Worms are great for small spaces; red wigglers eat scraps fast and "
            "make very rich compost.",
        ),
        (
            "we have a lot of rats in our neighborhood",
            "Then use a closed bin with a solid lid and a mesh bottom, "
            "and never add meat or bread.",
        ),
        (
            "How do I know it's finished?",
            "When it's dark, crumbly and smells like soil, and you can't recognize the scraps.",
        ),
    ),
    Topic(
        "car_oil",
        "checking a car's oil",
        ("How do I check the oil in my car?", "Can you walk me through checking my car's oil?"),
        "Sure, park on level ground and wait a few minutes after turning the engine off so the oil settles.",
        "Pull out the dipstick, wipe it clean, push it all the way back in and pull it out again. The oil should "
        "sit between the two marks, and it should look amber or brown rather than black and gritty.",
        "Simply put: pull the stick out, wipe it, dip it again, and check the oil is between the two marks.",
        "The dipstick is usually the one with the brightly colored handle, since cars are apparently proud of it.",
        (
            "but it's a newer car with no dipstick",
            "Some newer cars check oil electronically; look for an oil "
            "level option in the dashboard menu or the owner's manual.",
        ),
        (
            "what kind of oil to top up with",
            "The owner's manual lists the oil type, something like five W thirty; "
            "it's also often printed on the oil filler cap.",
        ),
        (
            "I change my own oil already",
            "Then keep an eye on consumption between changes: if you're topping up more "
            "than a quart every thousand miles or so, it's worth checking for leaks or worn seals.",
        ),
        "Level ground, engine off, wipe and dip, check the level and color.",
        (
            "actually, how do I check tire pressure?",
            "Use a gauge on each valve when the tires are cold, and compare "
            "with the sticker inside the driver's door.",
        ),
        (
            "I'm about to drive across the country",
            "Then also check coolant and brake fluid, look at the tire "
            "tread, and bring a quart of the right oil along.",
        ),
        ("How often should I check it?", "About once a month, and before any long trip."),
    ),
    Topic(
        "cookies",
        "baking chocolate chip cookies",
        (
            "How do I make really good chocolate chip cookies?",
            "What's the secret to chewy chocolate chip cookies?",
        ),
        "Sure, it starts with creaming soft butter and sugar together until it's light and fluffy.",
        "Beat in an egg and vanilla, then gently fold in flour, baking soda and salt, and finally the chocolate "
        "chips. Chill the dough for at least an hour, then bake until the edges are golden but the middles still "
        "look a little soft.",
        "The simple version: mix butter and sugar, add the rest, chill it, and don't overbake.",
        "Recipes say makes two dozen, but that number never accounts for how much dough disappears before baking.",
        (
            "but I don't have a mixer",
            "No mixer is fine. Melt the butter instead and stir by hand; melted butter "
            "actually makes the cookies chewier.",
        ),
        (
            "how to keep them chewy",
            "For chewy cookies, use more brown sugar than white, take them out while the "
            "centers look underdone, and store them with a slice of bread.",
        ),
        (
            "I bake all the time",
            "Then try browning the butter first and resting the dough overnight; the flavor "
            "gets deeper and more toffee like.",
        ),
        "Cream, fold, chill, and pull them out early.",
        (
            "actually, could I make them with oats?",
            "Yes, swap about a third of the flour for rolled oats for a heartier cookie.",
        ),
        (
            "my son has an egg allergy",
            "Then replace the egg with a tablespoon of ground flax mixed with three "
            "tablespoons of water, left for five minutes; it works really well in cookies.",
        ),
        (
            "Can I freeze the dough?",
            "Yes, scoop it into balls, freeze them, and bake straight from frozen with a "
            "couple of extra minutes.",
        ),
    ),
    Topic(
        "meditation",
        "starting to meditate",
        ("How do I get started with meditation?", "What's a simple way to start meditating?"),
        "Sure, start really small, just five minutes sitting somewhere quiet and comfortable.",
        "Close your eyes and pay attention to your breath, the air going in and out. Your mind will wander, and "
        "that's normal; each time you notice it, gently come back to the breath. Doing it at the same time every "
        "day helps it stick.",
        "Put simply: sit quietly, notice your breathing, and come back to it whenever your mind wanders.",
        "Beginners often worry they're bad at it, but noticing you got distracted is the exercise, so you're winning.",
        (
            "oh, but I have two little kids and no quiet time",
            "Then try it in the car before you go inside, or for "
            "two minutes in the shower; short and imperfect still counts.",
        ),
        (
            "how to deal with racing thoughts",
            "For racing thoughts, try silently labeling them, like thinking or "
            "planning, and then return to the breath; counting breaths up to ten also helps.",
        ),
        (
            "I've meditated on and off for years",
            "Then try longer sits with open awareness, where you notice sounds, "
            "sensations and thoughts without picking one focus, or a short retreat day.",
        ),
        "Five minutes, same time daily, follow the breath, and come back kindly.",
        (
            "actually, what about breathing exercises for stress?",
            "Box breathing helps: in for four, hold for four, "
            "out for four, hold for four, a few rounds.",
        ),
        (
            "I've been dealing with panic attacks",
            "Then start with eyes open and short sessions, and grounding "
            "exercises like naming things you can see; a therapist can help tailor it.",
        ),
        (
            "Should I use an app?",
            "An app with guided sessions can help at first, but it's not required.",
        ),
    ),
    Topic(
        "camping",
        "planning a first camping trip",
        ("How do I plan my first camping trip?", "What do I need for a first time camping trip?"),
        "Sure, for a first trip, pick a campground with toilets and water that's close to home.",
        "Practice setting up your tent in the yard first, and bring a sleeping bag rated for the night time "
        "temperature plus a pad underneath. Pack a simple stove, easy meals, a headlamp and layers, and check the "
        "weather the day before.",
        "Simply: choose an easy campground nearby, practice with the tent, and pack warm.",
        "Everyone's first camping trip includes one person holding a tent pole and asking where it goes, for about an hour.",
        (
            "oh, but I don't own any gear",
            "Many outdoor stores and some parks rent tents, bags and stoves for the "
            "weekend, which is perfect before you buy anything.",
        ),
        (
            "what food to bring",
            "For food, keep it simple: pre-made burritos or pasta you just reheat, oatmeal for "
            "breakfast, and snacks that don't need a cooler.",
        ),
        (
            "I've car camped a lot",
            "Then a short backpacking overnight is the next step: keep your pack under a "
            "fifth of your body weight and practice filtering water on a day hike first.",
        ),
        "Close, easy campground, practice the tent, warm sleeping gear, simple food.",
        (
            "actually, what about camping with a dog?",
            "Check the campground allows dogs, bring a leash and a stake, "
            "and pack extra water and a blanket for them.",
        ),
        (
            "I'm bringing my elderly dad",
            "Then pick a site close to the toilets and parking, bring a camp chair with "
            "arms and a thick pad or cot, and plan shorter walks.",
        ),
        (
            "What about bears?",
            "Store all food and toiletries in the car or a bear box, never in the tent.",
        ),
    ),
    Topic(
        "puppy_sit",
        "teaching a puppy to sit",
        ("How do I teach my puppy to sit?", "What's the easiest way to train a puppy to sit?"),
        "Sure, hold a small treat just in front of the puppy's nose while it's standing.",
        "Slowly move the treat up and back over its head; as the nose follows, its bottom will drop to the floor. "
        "The moment it sits, say yes and give the treat, and after a few days add the word sit just before you move "
        "your hand.",
        "In short: lure the puppy's nose up with a treat, and reward it the second it sits.",
        "Puppies tend to learn sit in about a day and then decide it only counts in the kitchen.",
        (
            "oh, but she's not very food motivated",
            "Then try a favorite toy or lots of praise as the reward, and "
            "train just before meals when she's a bit hungrier.",
        ),
        (
            "how long the sessions should be",
            "Keep sessions to about five minutes, a few times a day; puppies lose focus quickly.",
        ),
        (
            "I've trained dogs before",
            "Then work on the three D's: slowly add duration, distance and distractions, "
            "one at a time, and fade the treat lure into a hand signal.",
        ),
        "Lure with a treat, reward instantly, short sessions, add the word later.",
        (
            "actually, how do I stop her from biting?",
            "When she bites, stop play for a moment and offer a chew toy "
            "instead, every single time.",
        ),
        (
            "I'm deaf, so voice commands are tricky",
            "Hand signals work wonderfully; dogs often learn them faster "
            "than words. Use a thumbs up or a flash of a light as the yes marker.",
        ),
        ("When can I start?", "Right away; puppies can learn sit at eight weeks old."),
    ),
    Topic(
        "resume",
        "writing a resume",
        (
            "How do I write a good resume?",
            "Can you help me figure out how to put together a resume?",
        ),
        "Sure, start with a short list of the jobs you've had, newest first, with dates.",
        "Under each job, write two to four bullet points about what you achieved, starting each with an action "
        "word and using numbers where you can. Keep it to one page, and tweak it for every job you apply to.",
        "Basically: list your jobs, and under each one say what you did well, briefly.",
        "Recruiters reportedly spend just a few seconds on a first look, so your resume has to make a very fast first impression.",
        (
            "oh, but I've been out of work for three years",
            "Then briefly name the gap, like family care, and list "
            "anything you did in that time, such as volunteering, courses or freelance work.",
        ),
        (
            "the summary at the top",
            "For the summary, write two lines: who you are professionally and the main "
            "thing you bring, tuned to the job you want.",
        ),
        (
            "I've written plenty of resumes",
            "Then tailor for the screening software: mirror the exact wording from "
            "the job ad where it's true for you, and keep the layout simple without tables.",
        ),
        "Newest jobs first, achievements with numbers, one page, tailored each time.",
        (
            "actually, do I need a cover letter?",
            "Yes, if it's optional, send one; a short, specific letter helps you stand out.",
        ),
        (
            "I'm switching careers from teaching",
            "Then lead with a skills section that translates your teaching "
            "experience, like training, planning and presenting, into the new field's language.",
        ),
        ("Should I include a photo?", "In the US, no; leave the photo off."),
    ),
    Topic(
        "wifi",
        "getting better Wi-Fi at home",
        (
            "How do I get better Wi-Fi around my house?",
            "Why is my Wi-Fi so weak in some rooms, and what do I do?",
        ),
        "Sure, the first fix is moving the router somewhere central and high up, out in the open.",
        "Walls, floors and especially metal or fish tanks block the signal, so avoid cupboards and corners. "
        "Restart it, update its software, and if some rooms are still weak, a mesh system with two or three units "
        "usually solves it.",
        "Simply put: put the router in the middle of the house, up high, and not in a cabinet.",
        "Microwaves can briefly interfere with some Wi-Fi, so your popcorn may be the reason the video call froze.",
        (
            "oh, but the router has to stay by the front door",
            "Then a mesh system or a single extender halfway "
            "between the router and the weak room is your best bet.",
        ),
        (
            "just the upstairs bedroom",
            "For one room, a powerline adapter or a single extender placed halfway "
            "usually does it, without replacing anything else.",
        ),
        (
            "I've already set up a mesh network",
            "Then look at channels and bands: put devices near the nodes on "
            "five gigahertz, pick a less crowded channel, and wire the nodes together if you can.",
        ),
        "Central, high, open placement; update; add mesh for weak spots.",
        (
            "actually, how do I make it more secure?",
            "Change the default admin password, use W P A three or two, "
            "and keep the router's software updated.",
        ),
        (
            "I work from home on video calls all day",
            "Then run an ethernet cable to your desk; a wired connection "
            "beats any Wi-Fi for calls.",
        ),
        (
            "Should I pay for faster internet?",
            "Only if a wired speed test is slow too; otherwise the problem is the Wi-Fi, not the plan.",
        ),
    ),
    Topic(
        "electric_bill",
        "lowering an electricity bill",
        ("How can I lower my electricity bill?", "My power bill is huge, what can I do about it?"),
        "Sure, start by finding out what uses the most power, which is usually heating, cooling and hot water.",
        "Turn the thermostat down a couple of degrees in winter and up in summer, wash clothes in cold water, and "
        "switch to LED bulbs. Unplug things that stay on standby, and check if your utility offers cheaper off "
        "peak rates.",
        "The simple version: heating and cooling cost the most, so adjust the thermostat, and use less hot water.",
        "Some old fridges use so much power that they're basically a very cold space heater.",
        (
            "oh, but I'm renting, so I can't change much",
            "Renters can still do a lot: LED bulbs, cold washes, "
            "smart power strips, and draft stoppers under doors all go with you when you move.",
        ),
        (
            "the air conditioning",
            "For air conditioning, clean or replace the filter, close blinds on sunny sides, "
            "and use fans so you can set the thermostat a few degrees higher.",
        ),
        (
            "I've done the obvious stuff already",
            "Then get a plug in power meter to find hidden energy hogs, and "
            "ask your utility for a free home energy audit.",
        ),
        "Thermostat, cold washes, LED bulbs, no standby, and off peak rates.",
        (
            "actually, are solar panels worth it?",
            "It depends on your roof, sun and local incentives; get a couple "
            "of quotes and compare the payback time.",
        ),
        (
            "I use an oxygen machine at night",
            "Then tell your utility; many have medical programs with lower rates "
            "and priority restoration, and never unplug that to save power.",
        ),
        (
            "Do smart thermostats help?",
            "They can, mostly by lowering the temperature automatically while you're asleep or away.",
        ),
    ),
    Topic(
        "swim_adult",
        "learning to swim as an adult",
        ("How do I learn to swim as an adult?", "I never learned to swim, where do I start?"),
        "Sure, start in the shallow end, just getting comfortable putting your face in the water and breathing out.",
        "Then practice floating on your front and back while holding the wall, and kicking with a kickboard. An "
        "adult beginner class is worth it, because an instructor can fix little things fast.",
        "Simply: get used to the water first, then learn to float, then kick.",
        "Adults often discover that water up to the chest feels deep, but you can just stand up, which is a great feature.",
        (
            "oh, but I'm honestly scared of the water",
            "That's really common. Start by just walking in the shallow "
            "end and blowing bubbles, and look for lessons that say they're for fearful adults.",
        ),
        (
            "breathing while swimming",
            "For breathing, blow out steadily underwater through your nose and mouth, then "
            "turn your head to the side to breathe in, rather than lifting it.",
        ),
        (
            "I can already swim a few lengths",
            "Then work on freestyle technique: long reaches, a steady kick from "
            "the hips, and breathing every three strokes so you swim straighter.",
        ),
        "Get comfortable, float, kick, and take a class.",
        (
            "actually, what about swimming in the ocean?",
            "Only swim at beaches with lifeguards, and if a current "
            "pulls you out, swim parallel to the shore.",
        ),
        (
            "I have a bad shoulder",
            "Then start with kicking drills and backstroke, which is usually gentler, and "
            "avoid forcing the overhead reach until a physical therapist says it's okay.",
        ),
        (
            "How long does it take to learn?",
            "Many adults can swim a length comfortably after eight to ten lessons.",
        ),
    ),
    Topic(
        "storm_kit",
        "preparing an emergency kit",
        (
            "How do I put together an emergency kit?",
            "What should go in an emergency kit for storms?",
        ),
        "Sure, start with water, about a gallon per person per day for at least three days.",
        "Add food that doesn't need cooking, a flashlight, spare batteries, a first aid kit and any medicines you "
        "take. Keep copies of important papers in a waterproof bag, and charge power banks when a storm is coming.",
        "In short: water, food, light, first aid and medicines, enough for three days.",
        "People stock up on bread before every storm, as if the emergency plan is toast.",
        (
            "oh, but I live in a tiny studio",
            "Then use a single storage bin under the bed, and buy water in "
            "stackable jugs; you can refill them from the tap.",
        ),
        (
            "what to do about medicines",
            "For medicines, ask your pharmacy about an early refill before storm season "
            "and keep a written list of doses and doctors in the kit.",
        ),
        (
            "I already have a basic kit",
            "Then plan for a longer outage: a way to cook without power, a battery "
            "radio, cash in small bills, and a meeting point for your family.",
        ),
        "Water, food, light, first aid, medicines and documents for three days.",
        (
            "actually, what about my pets?",
            "Add food, water, leashes, a carrier and vaccination papers for each pet.",
        ),
        (
            "my partner uses a wheelchair",
            "Then plan an accessible evacuation route early, register with your local "
            "emergency office, and keep spare batteries or a manual backup for the chair.",
        ),
        (
            "How often should I check it?",
            "Twice a year, when the clocks change, is an easy reminder.",
        ),
    ),
    Topic(
        "index_funds",
        "investing for retirement",
        (
            "How should I start investing for retirement?",
            "What's a simple way to begin saving for retirement?",
        ),
        "Sure, if your job offers a retirement plan with a match, start there, because the match is free money.",
        "Put in at least enough to get the full match, then consider an IRA on top. For most people, a low cost "
        "index fund or a target date fund is a simple choice, and the key is to keep adding regularly.",
        "Simply put: put money in the work plan, at least up to the match, in a low cost fund.",
        "The most successful investors are sometimes said to be the ones who forgot their password.",
        (
            "oh, but my job doesn't offer a plan",
            "Then open an IRA yourself at a low cost brokerage and set up an "
            "automatic monthly transfer, even a small one.",
        ),
        (
            "what a target date fund is",
            "A target date fund holds a mix of stocks and bonds that gets more cautious "
            "automatically as you get closer to the year in its name.",
        ),
        (
            "I already max out my work plan",
            "Then look at tax diversity: a Roth account alongside the traditional "
            "one gives you flexibility in retirement, and keep fees under a fifth of a percent.",
        ),
        "Get the match, pick a low cost fund, and keep contributing automatically.",
        (
            "actually, should I buy a house first?",
            "Keep getting the match while you save for the house; the match is hard to beat.",
        ),
        (
            "I have a lot of credit card debt",
            "Then pay down the high interest cards first, while still putting in "
            "enough to get any match, since that interest costs more than most investments earn.",
        ),
        (
            "How much should I save?",
            "A common goal is around fifteen percent of your income, but start where you can.",
        ),
    ),
    Topic(
        "indoor_herbs",
        "growing herbs indoors",
        ("How do I grow herbs on my windowsill?", "What's the trick to growing herbs inside?"),
        "Sure, the most important thing is light, so pick your sunniest window, ideally one facing south.",
        "Use small pots with drainage holes and regular potting mix, and start with easy herbs like basil, mint "
        "and chives. Water when the top of the soil is dry, and pinch off the tips often so they grow bushy.",
        "The simple version: sunny window, pots with holes, water when dry, and keep picking them.",
        "Mint grows so eagerly that it would take over your kitchen if you gave it a key.",
        (
            "oh, but my windows don't get much sun",
            "Then a small LED grow light is worth it; herbs do very well "
            "under one for about twelve hours a day.",
        ),
        (
            "basil, because mine always dies",
            "Basil hates cold and wet roots: keep it away from drafty windows, "
            "water only when dry, and pinch off flower buds.",
        ),
        (
            "I've grown herbs outside for years",
            "Then try propagating: cuttings of mint, basil and rosemary root in "
            "water in a week or two, so you can keep fresh plants going all year.",
        ),
        "Sun, drainage, water when dry, and harvest often.",
        (
            "actually, could I grow lettuce the same way?",
            "Yes, loose leaf lettuce grows well indoors and you can cut it several times.",
        ),
        (
            "I have a toddler who touches everything",
            "Then put the pots on a high shelf near the window, and skip "
            "any plants that are unsafe to nibble.",
        ),
        (
            "How do I harvest without killing it?",
            "Never take more than a third of the plant at once, and cut just above a pair of leaves.",
        ),
    ),
    Topic(
        "cast_iron",
        "caring for a cast iron pan",
        (
            "How do I take care of a cast iron pan?",
            "What's the right way to clean and season cast iron?",
        ),
        "Sure, after cooking, rinse it with hot water and scrub off any stuck bits while it's still warm.",
        "A little soap is fine. Then dry it completely, ideally on the stove for a minute, and wipe a very thin "
        "layer of oil over the inside. Cooking with it often is what builds a good, slick surface.",
        "Basically: wash it, dry it right away, and rub on a little oil.",
        "Cast iron pans often outlive their owners, which makes them the only cookware with an inheritance plan.",
        (
            "oh, but mine is already covered in rust",
            "Rust comes off: scrub it with steel wool, wash and dry it, "
            "then oil it thinly and bake it upside down for an hour to reseason.",
        ),
        (
            "how to stop food sticking",
            "To stop sticking, preheat the pan properly, use enough fat, and let food "
            "release on its own before flipping.",
        ),
        (
            "I've cooked with cast iron for years",
            "Then try building seasoning with a few very thin oven coats of a "
            "high smoke point oil, wiping off almost everything each time.",
        ),
        "Clean warm, dry immediately, oil lightly, cook often.",
        (
            "actually, what about carbon steel pans?",
            "Carbon steel is cared for the same way, and it's lighter and heats faster.",
        ),
        (
            "I have weak wrists",
            "Then use a smaller ten inch pan or an enameled one, and lift it with two hands "
            "using the helper handle.",
        ),
        (
            "Can I cook tomatoes in it?",
            "Briefly, yes; long acidic simmering can strip the seasoning.",
        ),
    ),
    Topic(
        "knitting",
        "learning to knit",
        (
            "How do I learn to knit?",
            "What's the best way to start knitting as a complete beginner?",
        ),
        "Sure, start with medium weight yarn in a light color and a pair of medium sized needles.",
        "Learn to cast on, then practice just the knit stitch, row after row, to make a simple scarf. Once that "
        "feels easy, learn the purl stitch, and video tutorials help a lot because you can pause them.",
        "Simply: get chunky light yarn, learn one stitch, and make a scarf.",
        "Every knitter's first scarf somehow ends up wider at one end than the other, like a very cozy trumpet.",
        (
            "oh, but I'm left handed",
            "Most people knit right handed without trouble since both hands work, but "
            "there are left handed tutorials, or try continental style, which feels natural to many lefties.",
        ),
        (
            "how to fix mistakes",
            "To fix a dropped stitch, use a crochet hook to pull it back up row by row; "
            "putting in a lifeline thread also lets you rip back safely.",
        ),
        (
            "I already knit scarves and hats",
            "Then try knitting in the round for socks or a sweater from the top "
            "down, and learn to read a chart for colorwork.",
        ),
        "Light medium yarn, learn the knit stitch, make a scarf, then purl.",
        (
            "actually, is crochet easier?",
            "Crochet uses one hook and is great for shapes; knitting gives a "
            "stretchier fabric. Both are easy to start.",
        ),
        (
            "I have tremors in my hands",
            "Then try wooden needles, which grip the yarn, and chunky yarn; short "
            "sessions and resting your elbows on a cushion help.",
        ),
        ("How long does a scarf take?", "For a beginner, usually a couple of weeks of evenings."),
    ),
    Topic(
        "birdwatching",
        "getting into birdwatching",
        ("How do I get into birdwatching?", "What do I need to start birdwatching?"),
        "Sure, start right where you are, by watching the birds in your yard or a local park.",
        "A pair of binoculars and a regional field guide or a free app are all you need. Go out early in the "
        "morning when birds are most active, move slowly, and learn the common birds first so the unusual ones "
        "stand out.",
        "Basically, grab binoculars, go out early, and learn the common birds near you.",
        "Birders have a word for a bird you can't identify, and it's mostly an annoyed sigh.",
        (
            "oh, but I can't afford fancy binoculars",
            "You don't need fancy ones; a basic eight by forty two pair "
            "is great, and many libraries and nature centers lend them out.",
        ),
        (
            "learning bird songs",
            "For songs, learn three or four common ones first, using a sound ID app, and say "
            "the pattern to yourself in words.",
        ),
        (
            "I already know most of my local birds",
            "Then keep a list and share sightings on a citizen science site, "
            "and learn to tell birds by their flight patterns and calls.",
        ),
        "Local park, binoculars, early mornings, common birds first.",
        (
            "actually, how do I attract birds to my yard?",
            "Put out a feeder with black oil sunflower seed and a "
            "shallow water dish, and plant native shrubs.",
        ),
        (
            "I use a wheelchair",
            "Then look for accessible trails and boardwalks; many wildlife refuges list them, "
            "and a window feeder at home gives great views.",
        ),
        (
            "Is there a good time of year to start?",
            "Spring migration is the most exciting, but any season works.",
        ),
    ),
    Topic(
        "jump_start",
        "jump starting a car",
        ("How do I jump start a car?", "My battery's dead, how do I use jumper cables?"),
        "Sure, park the working car close to yours, turn both engines off, and open both hoods.",
        "Clip a red clamp to the dead battery's positive terminal, then the other red to the good battery's "
        "positive. Clip black to the good battery's negative, and the last black clamp to bare metal on the dead "
        "car, away from the battery. Start the good car, wait a few minutes, then try yours.",
        "Simply put: red to both positives, black to the good negative and to bare metal, then start the good car.",
        "Jumper cables are the one thing everybody owns and nobody can find when they actually need them.",
        (
            "oh, but there's nobody around to help",
            "Then a portable jump starter pack is the answer; it works on "
            "its own, and they're worth keeping in the trunk.",
        ),
        (
            "the order of the cables",
            "The order is red to dead positive, red to good positive, black to good "
            "negative, and black to bare metal on the dead car. Remove them in reverse.",
        ),
        (
            "I've jumped cars before",
            "Then if it keeps dying, test the battery and alternator; most auto parts "
            "stores will check both for free.",
        ),
        "Red to positives, black to good negative and bare metal, start the good car, wait, try yours.",
        (
            "actually, how do I know if I need a new battery?",
            "If it's over four or five years old or dies again soon, have it tested.",
        ),
        (
            "I have a pacemaker",
            "Then it's safest to let someone else handle the cables and the running engine, or "
            "call roadside assistance.",
        ),
        (
            "How long should I drive afterward?",
            "At least twenty to thirty minutes so the battery can recharge.",
        ),
    ),
    Topic(
        "heavy_shelf",
        "hanging a heavy shelf",
        (
            "How do I hang a heavy shelf on the wall?",
            "What's the safest way to put up a shelf for books?",
        ),
        "Sure, the safest way is to screw the brackets into the wooden studs behind the wall.",
        "Find the studs with a stud finder, mark them, and use a level to draw a straight line. Drill pilot holes, "
        "screw the brackets in with long wood screws, then attach the shelf.",
        "In short: find the wood behind the wall, and screw the brackets into that.",
        "Every shelf looks straight until you put one marble on it.",
        (
            "oh, but my walls are brick",
            "For brick, use a masonry bit and wall plugs, drilling into the brick "
            "itself rather than the mortar, with screws sized for the plugs.",
        ),
        (
            "which screws to use",
            "Use wood screws at least two and a half inches long into studs, and check the "
            "bracket's weight rating.",
        ),
        (
            "I've hung plenty of shelves",
            "Then for heavy loads, look at French cleats or floating shelf rods into "
            "several studs, which spread the weight better than simple brackets.",
        ),
        "Find the studs, level the line, pilot holes, long screws.",
        (
            "actually, what about a heavy mirror?",
            "Use two heavy picture hooks into studs or a French cleat, never one nail.",
        ),
        (
            "I'm renting and can't drill much",
            "Then consider a freestanding bookcase, or heavy duty adhesive strips "
            "only for light things, and ask your landlord before drilling.",
        ),
        (
            "How much weight can it hold?",
            "That depends on the brackets; check the rating and stay well under it.",
        ),
    ),
    Topic(
        "journaling",
        "starting a journal",
        ("How do I start journaling?", "What's a good way to get into keeping a journal?"),
        "Sure, keep it easy at first, just a few minutes at the same time each day.",
        "Write whatever comes to mind, or use a simple prompt like what went well today and what's on my mind. "
        "Don't worry about spelling or making it interesting; the point is the habit, not the writing.",
        "Simply: a few minutes a day, write anything, and don't judge it.",
        "Many people buy a beautiful journal and then feel too intimidated to write in it, so a cheap notebook is secretly the best choice.",
        (
            "oh, but I hate handwriting",
            "Then type it; a notes app or a simple document works just as well, and "
            "some people even record voice notes.",
        ),
        (
            "what to write about",
            "Try three prompts: one thing that happened, one thing you felt, and one thing "
            "you're looking forward to.",
        ),
        (
            "I've journaled off and on for years",
            "Then try a weekly review: once a week, read back your entries and "
            "note patterns in your moods, energy and what drains you.",
        ),
        "A few minutes, same time daily, write anything, no judging.",
        (
            "actually, what about gratitude journals?",
            "Writing three specific things you're grateful for each "
            "night is a simple version many people like.",
        ),
        (
            "I'm dealing with grief right now",
            "Then it can help to write letters to the person you lost, and go "
            "gently; some days a single sentence is enough.",
        ),
        (
            "Morning or evening?",
            "Whichever you'll stick with; many people like the evening to wind down.",
        ),
    ),
)


TOPIC_TAGS: dict[str, str] = {
    "sourdough": "food",
    "balcony_tomatoes": "garden place home",
    "couch_5k": "fitness health age",
    "budget": "money kids work",
    "watering_plants": "garden home",
    "guitar_chords": "music",
    "leaky_faucet": "diy home",
    "sleep": "sleep health age",
    "cold_brew": "food",
    "paint_room": "diy home",
    "interview_prep": "work",
    "composting": "garden food place",
    "car_oil": "car",
    "cookies": "food kids",
    "meditation": "health sleep",
    "camping": "outdoors travel place",
    "puppy_sit": "pets",
    "resume": "work writing",
    "wifi": "tech home",
    "electric_bill": "money home place",
    "swim_adult": "fitness water age health",
    "storm_kit": "safety home place",
    "index_funds": "money age work",
    "indoor_herbs": "garden food",
    "cast_iron": "food",
    "knitting": "crafts",
    "birdwatching": "outdoors birds place",
    "jump_start": "car",
    "heavy_shelf": "diy home",
    "journaling": "writing health",
}

# Skip Basics: the user knows the topic, so the question claims nothing about being new to it.
EXPERT_ASKS: dict[str, str] = {
    "sourdough": "Can you go over how to keep a sourdough starter healthy?",
    "balcony_tomatoes": "What should I keep in mind with tomatoes in pots on a balcony?",
    "couch_5k": "Can you go over how to train for a five k?",
    "budget": "Can you talk me through how you'd set up a monthly budget?",
    "watering_plants": "What's your take on watering houseplants?",
    "guitar_chords": "Can you go over guitar chords with me?",
    "leaky_faucet": "Can you walk me through fixing a dripping faucet?",
    "sleep": "What would you suggest for sleeping better?",
    "cold_brew": "How do you make good cold brew at home?",
    "paint_room": "Can you walk me through painting a room?",
    "interview_prep": "How would you prepare for a job interview?",
    "composting": "Can you go over composting at home?",
    "car_oil": "Can you walk me through checking a car's oil?",
    "cookies": "What makes a really good chocolate chip cookie?",
    "meditation": "What would you say about keeping up a meditation practice?",
    "camping": "What goes into planning a good camping trip?",
    "puppy_sit": "How would you teach a puppy to sit?",
    "resume": "What makes a resume stand out?",
    "wifi": "How do I get better Wi-Fi around my house?",
    "electric_bill": "How can I lower my electricity bill?",
    "swim_adult": "How would you work on swimming technique as an adult?",
    "storm_kit": "What should go in an emergency kit for storms?",
    "index_funds": "How would you approach investing for retirement?",
    "indoor_herbs": "What's the trick to growing herbs inside?",
    "cast_iron": "What's the right way to care for cast iron?",
    "knitting": "Can you talk me through knitting techniques?",
    "birdwatching": "How do you get more out of birdwatching?",
    "jump_start": "Can you go over how to jump a car?",
    "heavy_shelf": "How do I hang a heavy shelf on the wall?",
    "journaling": "What makes a journaling habit stick?",
}
