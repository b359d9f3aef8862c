#!/usr/bin/env python3
"""Generates tests/corpus/conversations.json: the conversational recall set (issue #21).

Long multi-session chats between two friends, one memory per turn, and questions
labelled with the turns that hold their answers — the shape of the public long-memory
benchmarks, written from scratch here:

- 32 conversations of 6 dated sessions each (a session is 10-16 turns: greetings,
  small talk, and life events told in the first person with relative times such as
  "last weekend"; the friend's reaction often repeats the event's words, as people do,
  so keywords alone do not find the turn that holds the fact);
- questions of four kinds: `single-hop` (one turn holds the answer, asked with the
  person's name and often in other words than the turn uses), `multi-hop` (two turns
  in different sessions: one introduces a person or thing, a later one tells
  something about it without repeating the link), `temporal` ("when did…", "which came
  first…"; the answer needs the session's date), and `open-domain` (an inference that
  needs world knowledge: "would Maria enjoy a steakhouse dinner?" → the turn where she
  went vegetarian).

**Two splits that share nothing but the format.** The event catalogue, the small talk
and the names are split in two halves: `tune` conversations draw only from one half and
`heldout` conversations only from the other, so weights tuned on `tune` cannot have
seen the wording, the topics or the people of `heldout`. Report both; tune on `tune`
only.

Deterministic (fixed seed): re-running it rewrites the same file. Run from the repo
root: `python3 tests/corpus/conversations.py`. `--stats` prints the counts.
"""

import datetime as dt
import json
import random
import sys
from pathlib import Path

SEED = 20261201
CONVERSATIONS = 32
SESSIONS = 6

# Names: even positions go to `tune`, odd ones to `heldout`.
NAMES = [
    "Maria", "Caroline", "Jonas", "Priyanka", "Tomasz", "Aiko", "Daniel", "Fatima",
    "Lucas", "Ingrid", "Mateo", "Nadia", "Oliver", "Sofia", "Kwame", "Elena",
    "Rafael", "Hannah", "Yusuf", "Clara", "Dmitri", "Leila", "Samuel", "Mei",
    "Gabriel", "Amara", "Henrik", "Zoe", "Marco", "Ayesha", "Felix", "Rosa",
    "Theo", "Keiko", "Omar", "Julia", "Viktor", "Chloe", "Arjun", "Beatriz",
    "Noah", "Freya", "Emeka", "Lotte", "Diego", "Sana", "Pavel", "Imogen",
    "Hugo", "Nia", "Stefan", "Lucia", "Kofi", "Astrid", "Ravi", "Elif",
    "Bruno", "Maya", "Anton", "Carmen", "Idris", "Greta", "Jamal", "Vera",
]

# Relative times as people say them, with the offset in days from the session date.
WHEN = [
    ("yesterday", -1), ("last weekend", -7), ("on Saturday", -3), ("this morning", 0),
    ("last week", -6), ("two days ago", -2), ("on Sunday", -2), ("last Friday", -4),
]

# One life event: the turn that tells it (`say`, first person, `{when}` a relative
# time), an optional second turn in a later session (`later`: tells more about the
# event's person or thing without restating the link), the friend's reactions, and the
# questions it can answer: (kind, question, evidence) with evidence `say`, `later` or
# `both`. Slots in braces are drawn per telling from `slots`.
EVENTS = [
    {
        "slots": {"breed": ["beagle", "border collie", "golden retriever", "dachshund"], "pet": ["Pepper", "Biscuit", "Juno", "Waffles"]},
        "say": ["We finally brought home a {breed} puppy {when}! We named her {pet}.",
                "Big news: we adopted a little {breed} {when}, her name is {pet}."],
        "later": ["{pet} chewed through my running shoes and the sofa cushion, I can't even be mad."],
        "react": ["A puppy! Send me pictures please.", "Oh I love dogs, that's wonderful news."],
        "q": [("single-hop", "What is the name of {S}'s dog?", "say"),
              ("single-hop", "What kind of pet did {S} get?", "say"),
              ("temporal", "When did {S} adopt a dog?", "say"),
              ("multi-hop", "What did {S}'s new puppy destroy?", "both")],
    },
    {
        "slots": {"instrument": ["cello", "violin", "piano", "saxophone"]},
        "say": ["I signed up for {instrument} lessons {when}, my teacher says I have a good ear.",
                "I finally started learning the {instrument}, first lesson was {when}."],
        "react": ["That's brave, I always wanted to learn music.", "Lessons are the best way, good for you."],
        "q": [("single-hop", "Which musical instrument is {S} learning to play?", "say"),
              ("temporal", "When did {S} begin music lessons?", "say"),
              ("open-domain", "Would {S} appreciate tickets to a classical concert?", "say")],
    },
    {
        "slots": {"city": ["Lisbon", "Valencia", "Rotterdam", "Porto", "Krakow"]},
        "say": ["I ran the {city} half marathon {when}, 21 kilometres and my legs are still jelly.",
                "Crossed the finish line of the {city} half marathon {when}, slower than I hoped but I finished."],
        "react": ["Wow, that's a long way to run!", "Congratulations, I get tired running for the bus."],
        "q": [("single-hop", "What race did {S} complete?", "say"),
              ("temporal", "When did {S} run a half marathon?", "say"),
              ("single-hop", "In which city did {S} do a long-distance running event?", "say")],
    },
    {
        "slots": {"company": ["Northwind", "Helix Labs", "Bluebird Health", "Quanta Logistics"], "role": ["data analyst", "product designer", "site engineer", "nurse practitioner"]},
        "say": ["I accepted the offer from {company} {when}, I'll be their new {role}.",
                "So I signed the contract with {company} {when}, starting as a {role} next month."],
        "later": ["The first week at the new place was intense, my manager there already gave me a project on hospital scheduling."],
        "react": ["A new job, how exciting!", "That's a big step, you deserve it."],
        "q": [("single-hop", "Which employer hired {S}?", "say"),
              ("single-hop", "What is {S}'s new role?", "say"),
              ("temporal", "When did {S} accept a job offer?", "say"),
              ("multi-hop", "What project did {S} get in the first week at {company}?", "both")],
    },
    {
        "slots": {"city": ["Edinburgh", "Montreal", "Melbourne", "Vienna", "Austin"]},
        "say": ["We're packing boxes, we move to {city} at the end of the month.",
                "We decided to relocate to {city}, the lease starts in a few weeks."],
        "react": ["You'll be so far away! But it sounds amazing.", "A new city, what an adventure."],
        "q": [("single-hop", "Which city is {S} relocating to?", "say"),
              ("open-domain", "Is {S} about to change their home address?", "say")],
    },
    {
        "slots": {"country": ["Japan", "Peru", "Morocco", "Vietnam", "Iceland"]},
        "say": ["Got back from two weeks in {country} {when}, the food was unbelievable.",
                "We flew home from {country} {when}, I already miss the street food."],
        "react": ["I've always wanted to go there!", "Two weeks away sounds like a dream."],
        "q": [("single-hop", "Which country did {S} travel to?", "say"),
              ("temporal", "When did {S} come back from abroad?", "say")],
    },
    {
        "slots": {"book": ["The Glass Orchard", "Salt and Silence", "A Map of Winter", "The Last Lighthouse"]},
        "say": ["I couldn't put down {book}, finished it in two nights.",
                "Just read {book} cover to cover, stayed up until 3am."],
        "react": ["I need a good book, adding it to my list.", "That's how you know a book is good."],
        "q": [("single-hop", "What novel did {S} read in a couple of nights?", "say"),
              ("open-domain", "Does {S} enjoy reading fiction?", "say")],
    },
    {
        "slots": {"food": ["peanuts", "shellfish", "sesame", "kiwi"]},
        "say": ["Turns out I'm allergic to {food}, the doctor confirmed it {when}.",
                "The allergy test came back {when}: {food}. No wonder I felt awful."],
        "react": ["That explains a lot! Glad you found out.", "Oh no, you'll have to read every label now."],
        "q": [("single-hop", "What food must {S} avoid?", "say"),
              ("open-domain", "Should {S} order the satay at a Thai restaurant?", "say")],
    },
    {
        "slots": {"relative": ["sister", "brother", "cousin"], "rel": ["Ana", "Tobias", "Lena", "Marcus"]},
        "say": ["My {relative} {rel} just got engaged {when}, the whole family is thrilled."],
        "later": ["{rel} picked a vineyard in the hills for the wedding, it's going to be gorgeous."],
        "react": ["Congratulations to them!", "A wedding, how lovely."],
        "q": [("single-hop", "Which of {S}'s relatives got engaged?", "say"),
              ("multi-hop", "Where will the wedding of {S}'s {relative} take place?", "both"),
              ("temporal", "When did {S}'s {relative} get engaged?", "say")],
    },
    {
        "slots": {"coll": ["Priya", "Ruth", "Kenji", "Alba"], "city": ["Bangalore", "Nairobi", "Osaka", "Seville"]},
        "say": ["A new teammate, {coll}, joined us from {city}; brilliant with spreadsheets."],
        "later": ["{coll} and I are presenting together at the regional planning conference in March."],
        "react": ["It's great when someone new brings energy.", "New colleagues can change everything."],
        "q": [("single-hop", "Who joined {S}'s team?", "say"),
              ("multi-hop", "Where will {S} present with the colleague who came from {city}?", "both")],
    },
    {
        "slots": {"place": ["Riverside", "Eastgate", "Old Town", "Harbour"]},
        "say": ["I spent {when} volunteering at the {place} food bank, sorting donations for hours."],
        "react": ["That's so kind of you.", "I should volunteer more, you inspire me."],
        "q": [("single-hop", "Where does {S} volunteer?", "say"),
              ("open-domain", "Does {S} care about helping people in need?", "say")],
    },
    {
        "slots": {"old": ["old hatchback", "ancient van", "rusty sedan"], "car": ["Toyota Corolla", "Volvo estate", "Kia Niro", "Honda Jazz"]},
        "say": ["The {old} finally died, so I bought a used {car} {when}."],
        "react": ["Rest in peace, old car.", "A new car, nice! Is it comfortable?"],
        "q": [("single-hop", "What car does {S} drive now?", "say"),
              ("temporal", "When did {S} buy a car?", "say")],
    },
    {
        "slots": {"crop": ["tomatoes", "courgettes", "strawberries", "peppers"]},
        "say": ["My {crop} are finally ripe, the allotment paid off this year."],
        "react": ["Homegrown tastes so much better.", "You have a green thumb!"],
        "q": [("single-hop", "What is {S} growing at the allotment?", "say"),
              ("open-domain", "Does {S} have a garden plot?", "say")],
    },
    {
        "slots": {"cuisine": ["Italian", "Thai", "Ethiopian", "Mexican"], "dish": ["fresh pasta", "green curry", "injera", "tamales"]},
        "say": ["Took a {cuisine} cooking class {when}, I can make {dish} from scratch now."],
        "react": ["Invite me over to try it!", "Cooking classes are so much fun."],
        "q": [("single-hop", "What dish did {S} learn to make?", "say"),
              ("temporal", "When did {S} take a cooking class?", "say")],
    },
    {
        "slots": {"sport": ["five-a-side football", "basketball", "squash", "netball"]},
        "say": ["I twisted my ankle playing {sport} {when}, so I'm on crutches for a while."],
        "react": ["Ouch! Take care of yourself.", "Injuries are the worst, rest up."],
        "q": [("single-hop", "How did {S} get injured?", "say"),
              ("temporal", "When did {S} hurt an ankle?", "say"),
              ("open-domain", "Is {S} able to go on a long hike right now?", "say")],
    },
    {
        "slots": {"topic": ["coral reef recovery", "medieval trade routes", "urban heat islands", "language acquisition in toddlers"]},
        "say": ["I handed in my thesis on {topic} {when}! The defense is next month."],
        "react": ["Years of work, done! Celebrate properly.", "You must be so relieved."],
        "q": [("single-hop", "What is {S}'s dissertation about?", "say"),
              ("temporal", "When did {S} submit a thesis?", "say")],
    },
    {
        "slots": {"band": ["The Lanterns", "Midnight Ferry", "Paper Tigers", "Velvet Arcade"], "venue": ["Roundhouse", "Olympia", "Paradiso", "Apollo"]},
        "say": ["We saw {band} live at the {venue} {when}, best night of the year."],
        "react": ["Live music is the best.", "I'm so jealous, I love them."],
        "q": [("single-hop", "Which band did {S} see in concert?", "say"),
              ("temporal", "When did {S} go to a gig?", "say")],
    },
    {
        "slots": {"subject": ["harbour boats", "wildflowers", "old doorways", "mountain lakes"]},
        "say": ["I've been painting {subject} with watercolours every evening."],
        "later": ["A little café downtown agreed to hang six of my paintings for a month."],
        "react": ["You should show me sometime.", "That sounds so relaxing."],
        "q": [("single-hop", "What art medium does {S} use?", "say"),
              ("multi-hop", "Where is {S}'s artwork of {subject} being exhibited?", "both")],
    },
    {
        "slots": {"kid": ["Leo", "Mia", "Sam", "Ivy"], "age": ["five", "seven", "nine", "ten"], "theme": ["dinosaur", "pirate", "space", "unicorn"]},
        "say": ["My kid {kid} turns {age} next week, we're planning a {theme} party."],
        "react": ["Kids' parties are chaos but so sweet.", "They grow up so fast!"],
        "q": [("single-hop", "How old is {S}'s child turning?", "say"),
              ("single-hop", "What theme did {S} choose for the birthday?", "say")],
    },
    {
        "slots": {"act": ["went paragliding", "did a bungee jump", "climbed an indoor wall to the top", "crossed a rope bridge"]},
        "say": ["I finally {act} {when}, despite my fear of heights."],
        "react": ["No way, you're braver than me.", "Facing fears is huge, well done."],
        "q": [("single-hop", "What did {S} do to face a phobia?", "say"),
              ("open-domain", "Is {S} afraid of heights?", "say")],
    },
    {
        "slots": {"month": ["January", "March", "June", "September"]},
        "say": ["I've gone vegetarian since {month}, no meat at all and I feel great."],
        "react": ["Good for you, I could never give up bacon.", "It's easier than people think."],
        "q": [("single-hop", "What diet does {S} follow?", "say"),
              ("open-domain", "Would {S} enjoy a steakhouse dinner?", "say")],
    },
    {
        "slots": {"colour": ["blue", "yellow", "green"], "landmark": ["old mill", "canal", "railway station"]},
        "say": ["We closed on the house {when}! A little {colour} cottage near the {landmark}."],
        "later": ["The roof of the cottage leaks every time it rains, we've called three roofers."],
        "react": ["Homeowners now, congratulations!", "A cottage sounds so cosy."],
        "q": [("single-hop", "What kind of home did {S} buy?", "say"),
              ("multi-hop", "What problem does {S}'s house near the {landmark} have?", "both"),
              ("temporal", "When did {S} become a homeowner?", "say")],
    },
    {
        "slots": {"subject": ["true crime", "urban gardening", "film soundtracks", "board games"], "partner": ["cousin", "roommate", "neighbour"]},
        "say": ["I started a podcast about {subject} with my {partner}, the first episode is out."],
        "react": ["I'll listen on my commute!", "Everyone has a podcast now, but yours sounds fun."],
        "q": [("single-hop", "What is {S}'s podcast about?", "say"),
              ("single-hop", "Who co-hosts the show with {S}?", "say")],
    },
    {
        "slots": {"parent": ["dad", "mum"], "op": ["knee surgery", "a hip replacement", "heart bypass surgery"]},
        "say": ["My {parent} had {op} {when}; recovering at home now."],
        "react": ["Wishing a quick recovery.", "That must have been stressful for you."],
        "q": [("single-hop", "Which of {S}'s parents had an operation?", "say"),
              ("temporal", "When did {S}'s {parent} have surgery?", "say")],
    },
    {
        "slots": {"role": ["team lead", "head of operations", "senior editor", "charge nurse"]},
        "say": ["I got promoted to {role} {when}, still can't believe it."],
        "react": ["You earned it!", "Drinks are on you then."],
        "q": [("single-hop", "What position was {S} promoted to?", "say"),
              ("temporal", "When did {S} get a promotion?", "say")],
    },
    {
        "slots": {"language": ["Portuguese", "Korean", "Greek", "Turkish"]},
        "say": ["I've been practising {language} on an app every morning before the trip."],
        "react": ["Languages are hard, keep going!", "Say something for me next time."],
        "q": [("single-hop", "Which language is {S} studying?", "say"),
              ("open-domain", "Is {S} planning to travel soon?", "say")],
    },
    {
        "slots": {"mountain": ["Ben Nevis", "Mount Olympus", "Snowdon", "Triglav"]},
        "say": ["We hiked up {mountain} {when}, the view from the summit was worth every step."],
        "react": ["That's quite a climb.", "Mountains clear the head."],
        "q": [("single-hop", "Which peak did {S} climb?", "say"),
              ("temporal", "When did {S} go up a mountain?", "say")],
    },
    {
        "slots": {"amount": ["1,200", "850", "2,400", "3,000"], "cause": ["the children's hospital", "the animal shelter", "a cancer charity"]},
        "say": ["We raised {amount} pounds for {cause} with the bake sale {when}."],
        "react": ["That's incredible, well done.", "So much cake, for a good cause."],
        "q": [("single-hop", "How much money did {S} raise?", "say"),
              ("single-hop", "Which cause did {S}'s bake sale support?", "say")],
    },
    {
        "slots": {"item": ["laptop", "camera", "backpack with my passport"], "where": ["train", "tram", "ferry"]},
        "say": ["I left my {item} on the {where} {when}, so many photos gone."],
        "later": ["The lost-property office called, someone handed it in, nothing missing!"],
        "react": ["Oh no! Did you call lost and found?", "That's a nightmare."],
        "q": [("single-hop", "What did {S} lose while commuting?", "say"),
              ("multi-hop", "Did {S} get the {item} back?", "both"),
              ("temporal", "When did {S} misplace belongings on public transport?", "say")],
    },
    {
        "slots": {"sport": ["swim laps", "row on the machine", "go cycling"]},
        "say": ["I've been getting up at 5 to {sport} before work, it's changed my mornings."],
        "react": ["5am? You're a machine.", "I can barely get out of bed at 7."],
        "q": [("single-hop", "What exercise does {S} do early in the day?", "say"),
              ("open-domain", "Is {S} an early riser?", "say")],
    },
    {
        "slots": {"course": ["pottery", "woodworking", "photography", "bookbinding"]},
        "say": ["I joined an evening {course} course at the community college."],
        "later": ["My teacher at the college course said my last piece could go in the student show."],
        "react": ["Making things with your hands is so satisfying.", "Evening classes are a great idea."],
        "q": [("single-hop", "What evening course did {S} enroll in?", "say"),
              ("multi-hop", "What did {S}'s {course} teacher suggest?", "both")],
    },
    {
        "slots": {"boss": ["Mr. Okafor", "Ms. Lindqvist", "Dr. Haddad"], "reason": ["the budget cuts", "the reorganisation", "the missed deadline"]},
        "say": ["My boss {boss} called a crisis meeting {when} about {reason}."],
        "react": ["Sounds tense at work.", "I hope your job is safe."],
        "q": [("single-hop", "Who is {S}'s manager?", "say"),
              ("single-hop", "Why was there an emergency meeting at {S}'s job?", "say")],
    },
    {
        "slots": {"pet": ["a grey cat", "two rabbits", "an old parrot"], "name": ["Smokey", "Clover", "Captain"]},
        "say": ["We're fostering {pet} from the shelter, we call them {name}."],
        "react": ["Fostering is such a kind thing to do.", "Aww, I want to meet them."],
        "q": [("single-hop", "What animals is {S} fostering?", "say"),
              ("open-domain", "Does {S} have animals at home?", "say")],
    },
    {
        "slots": {"instrument": ["choir", "brass band", "folk group"], "event": ["the Christmas market", "the town festival", "a wedding"]},
        "say": ["Our {instrument} is performing at {event}, rehearsals every Tuesday now."],
        "react": ["I'll come and listen!", "Performing sounds scary but fun."],
        "q": [("single-hop", "What musical group is {S} part of?", "say"),
              ("single-hop", "Where will {S}'s group perform?", "say")],
    },
    {
        "slots": {"grade": ["distinction", "first-class result", "top mark"], "exam": ["accounting exam", "driving theory test", "nursing licence exam"]},
        "say": ["Passed my {exam} with a {grade} {when}!"],
        "react": ["All that studying paid off!", "Amazing, congratulations."],
        "q": [("single-hop", "Which test did {S} pass?", "say"),
              ("temporal", "When did {S} get the exam result?", "say")],
    },
    {
        "slots": {"move": ["learn to surf", "sail a dinghy", "kayak on the river"], "coach": ["Bea", "Rowan", "Tariq"]},
        "say": ["Every Saturday I'm down at the beach with {coach}, trying to {move}."],
        "later": ["{coach} says I'm ready for the bigger waves next month."],
        "react": ["Water sports, so cool.", "Don't swallow too much sea!"],
        "q": [("single-hop", "What water sport is {S} learning?", "say"),
              ("multi-hop", "What does {S}'s instructor say {S} is ready for?", "both")],
    },
    {
        "slots": {"thing": ["quit smoking", "stopped drinking coffee", "gave up sugar"], "days": ["forty", "ninety", "a hundred"]},
        "say": ["It's been {days} days since I {thing}, the first two weeks were hell."],
        "react": ["That takes real willpower.", "Proud of you, seriously."],
        "q": [("single-hop", "What habit did {S} give up?", "say"),
              ("single-hop", "How long has {S} kept the resolution?", "say")],
    },
    {
        "slots": {"film": ["a short documentary", "a music video", "an indie horror film"], "fest": ["Sundance", "a local film festival", "Berlinale"]},
        "say": ["I worked as a camera assistant on {film}, and it got into {fest}!"],
        "react": ["You're famous now!", "That's a big deal, congrats."],
        "q": [("single-hop", "What was {S}'s job on the film set?", "say"),
              ("single-hop", "Which festival selected {S}'s project?", "say")],
    },
    {
        "slots": {"grand": ["grandmother", "grandfather"], "age": ["ninety", "ninety-five", "a hundred"]},
        "say": ["We celebrated my {grand}'s {age}th birthday {when}, four generations in one room."],
        "react": ["What a milestone!", "That's so special."],
        "q": [("single-hop", "How old did {S}'s {grand} turn?", "say"),
              ("temporal", "When was {S}'s family's big birthday celebration?", "say")],
    },
]

# One more single-hop question per event (in catalogue order) that reuses the turn's
# own words, as many real questions do; the others are asked in other words. Reported
# as `lexical: true`.
LEXICAL = [
    "What did {S} name the {breed} puppy?",
    "What does {S}'s teacher say about the {instrument} lessons?",
    "How far did {S} run in the {city} half marathon?",
    "What will {S} be at {company}?",
    "When is {S} moving to {city}?",
    "What did {S} think of the food in {country}?",
    "How quickly did {S} finish {book}?",
    "What is {S} allergic to?",
    "Who is {S}'s {relative} that just got engaged?",
    "What is {S}'s new teammate {coll} brilliant with?",
    "What did {S} sort at the {place} food bank?",
    "What happened to {S}'s {old}?",
    "Which crop is finally ripe at {S}'s allotment?",
    "What can {S} make after the {cuisine} cooking class?",
    "Why is {S} on crutches?",
    "When is {S}'s thesis defense?",
    "Where did {S} see {band} live?",
    "What does {S} paint with watercolours?",
    "What party is {S} planning for {kid}?",
    "What did {S} do despite a fear of heights?",
    "Since when has {S} been vegetarian?",
    "Where is {S}'s {colour} cottage?",
    "Who did {S} start a podcast with?",
    "What surgery did {S}'s {parent} have?",
    "What did {S} get promoted to?",
    "How often does {S} practise {language}?",
    "What was the view like from the summit of {mountain}?",
    "How much did {S}'s bake sale raise?",
    "Where did {S} leave the {item}?",
    "Why does {S} get up at 5 before work?",
    "Where is {S}'s evening {course} course?",
    "What was {boss}'s crisis meeting about?",
    "What does {S} call the {pet} from the shelter?",
    "When does {S}'s {instrument} rehearse?",
    "What grade did {S} get on the {exam}?",
    "Who does {S} go to the beach with every Saturday?",
    "How many days has it been since {S} {thing}?",
    "What did {S} work on as a camera assistant?",
    "Whose birthday did {S}'s family celebrate with four generations in one room?",
]
assert len(LEXICAL) == len(EVENTS)
for _event, _question in zip(EVENTS, LEXICAL):
    _event["q"].append(("single-hop", _question, "say"))

# Small talk: even entries go to `tune`, odd ones to `heldout`. Topical words (dogs,
# running, jobs, trips) on purpose: they look like answers to keyword search.
SMALL_TALK = [
    "Work has been hectic, so many meetings this week.",
    "Honestly the weather has been awful, rain every single day.",
    "I watched a documentary about dogs last night, they're so smart.",
    "Did you see the match? What a finish.",
    "I keep meaning to start running again but never do.",
    "My phone screen cracked again, third time this year.",
    "We ordered takeaway three nights in a row, no shame.",
    "Traffic was terrible this morning, took an hour to get to the office.",
    "I've been trying to drink more water, it's harder than it sounds.",
    "The new café on the corner makes great coffee.",
    "I need a holiday, somewhere warm with a beach.",
    "My neighbours are renovating, drilling from 8am.",
    "I binged a whole series over the weekend, no regrets.",
    "Do you know any good books? I'm out of things to read.",
    "I'm thinking about getting a plant for the office.",
    "My sister keeps sending me cat videos.",
    "The supermarket was out of bread, can you believe it.",
    "I finally cleaned out the garage, found so much junk.",
    "Job hunting is exhausting, I don't envy anyone doing it.",
    "I think I'm coming down with a cold.",
    "We should get dinner sometime soon.",
    "The gym was packed, everyone has new year resolutions.",
    "My train was cancelled again, typical.",
    "I've started journaling before bed.",
    "I burned the toast this morning, not my best start.",
    "Music festivals are getting so expensive.",
    "My cousin is visiting next month, I need to tidy up.",
    "The kids at my friend's party were wild.",
    "Our team at work is hiring, if you know anyone.",
    "I tried yoga once and fell asleep in the last pose.",
    "Everyone at the office is talking about the new manager.",
    "I want to learn a language but can't pick one.",
]

GREETINGS = [
    ("Hey {O}! It's been a while, how are you?", "Hi {S}! Good, busy. You?"),
    ("Morning {O}, got a minute to catch up?", "Always, {S}. What's new?"),
    ("{O}! I have news.", "Tell me everything, {S}."),
    ("Hi {O}, how was your week?", "Long, {S}. Yours?"),
]
# How a dated event is named in a "which happened first" question, by its temporal
# question.
GIST = {
    "When did {S} adopt a dog?": "adopting the {breed}",
    "When did {S} begin music lessons?": "starting the {instrument} lessons",
    "When did {S} run a half marathon?": "the {city} half marathon",
    "When did {S} accept a job offer?": "accepting the job at {company}",
    "When did {S} come back from abroad?": "the trip to {country}",
    "When did {S}'s {relative} get engaged?": "the engagement of {rel}",
    "When did {S} buy a car?": "buying the {car}",
    "When did {S} take a cooking class?": "the {cuisine} cooking class",
    "When did {S} hurt an ankle?": "the {sport} injury",
    "When did {S} submit a thesis?": "handing in the thesis",
    "When did {S} go to a gig?": "the {band} concert",
    "When did {S} become a homeowner?": "buying the cottage",
    "When did {S}'s {parent} have surgery?": "the {parent}'s operation",
    "When did {S} get a promotion?": "the promotion to {role}",
    "When did {S} go up a mountain?": "the hike up {mountain}",
    "When did {S} misplace belongings on public transport?": "losing the {item}",
    "When did {S} get the exam result?": "passing the {exam}",
    "When was {S}'s family's big birthday celebration?": "the {grand}'s birthday party",
}
FOLLOW_UPS = ["Thanks! It still feels unreal.", "Yeah, I'm really happy about it.", "It's been a lot, but good."]


def fill(template: str, values: dict) -> str:
    return template.format(**values)


def temporal_gist(record: dict) -> str | None:
    """The event as a "which happened first" question names it, if it has a date."""
    for kind, text, _ in record["event"]["q"]:
        if kind == "temporal" and text in GIST:
            return fill(GIST[text], record["values"])
    return None


def main() -> None:
    rng = random.Random(SEED)
    splits = {"tune": [], "heldout": []}
    for i, e in enumerate(EVENTS):
        splits["tune" if i % 2 == 0 else "heldout"].append(e)
    talk = {"tune": SMALL_TALK[0::2], "heldout": SMALL_TALK[1::2]}
    names = {"tune": NAMES[0::2], "heldout": NAMES[1::2]}
    conversations, questions = [], []
    for c in range(CONVERSATIONS):
        split = "tune" if c % 2 == 0 else "heldout"
        pool = names[split]
        a, b = pool[(c // 2 * 2) % len(pool)], pool[(c // 2 * 2 + 1) % len(pool)]
        start = dt.date(2023, 1, 9) + dt.timedelta(days=rng.randrange(0, 500))
        dates, day = [], start
        for _ in range(SESSIONS):
            dates.append(day)
            day += dt.timedelta(days=rng.randrange(4, 25))
        # Each speaker tells 5-6 events, spread over the sessions; a `later` turn comes
        # one or two sessions after its event.
        plans = {s: [] for s in range(SESSIONS)}
        for speaker in (a, b):
            for e in rng.sample(splits[split], rng.choice([5, 6])):
                s = rng.randrange(0, SESSIONS - 1 if "later" in e else SESSIONS)
                values = {k: rng.choice(v) for k, v in e["slots"].items()}
                when = rng.choice(WHEN)
                plans[s].append((speaker, e, values, when))
        sessions, told = [], []
        for s in range(SESSIONS):
            turns = []

            def turn(speaker: str, text: str) -> str:
                tid = f"c{c:02d}-s{s + 1}-t{len(turns) + 1:02d}"
                turns.append({"id": tid, "speaker": speaker, "text": text})
                return tid

            chat = rng.sample(talk[split], len(talk[split]))  # no line twice in a session
            first, second = (a, b) if rng.random() < 0.5 else (b, a)
            g = rng.choice(GREETINGS)
            turn(first, g[0].format(S=first, O=second))
            turn(second, g[1].format(S=first, O=second))
            items = plans[s] + [("later", *x) for x in sum((t["due"] for t in told if t["due_session"] == s), [])]
            rng.shuffle(items)
            for item in items:
                if item[0] == "later":
                    _, record, text = item
                    record["later_turn"] = turn(record["speaker"], text)
                    other = b if record["speaker"] == a else a
                    turn(other, rng.choice(["Ha, of course.", "Oh wow, really?", "That's good to hear.", "Keep me posted!"]))
                    continue
                speaker, e, values, when = item
                other = b if speaker == a else a
                if rng.random() < 0.5:
                    turn(speaker, chat.pop())
                    turn(other, chat.pop())
                values = dict(values, when=when[0])
                said = turn(speaker, fill(rng.choice(e["say"]), values))
                turn(other, fill(rng.choice(e["react"]), values))
                if rng.random() < 0.4:
                    turn(speaker, rng.choice(FOLLOW_UPS))
                record = {"speaker": speaker, "event": e, "values": values, "say_turn": said,
                          "date": dates[s] + dt.timedelta(days=when[1]), "session": s}
                if "later" in e:
                    record["due_session"] = rng.randrange(s + 1, min(SESSIONS, s + 3))
                    record["due"] = [(record, fill(rng.choice(e["later"]), values))]
                else:
                    record["due_session"], record["due"] = -1, []
                told.append(record)
            for _ in range(rng.randrange(1, 4)):
                turn(rng.choice((a, b)), chat.pop())
            turn(second, "Anyway, I have to run. Talk soon!")
            turn(first, "Bye! Talk soon.")
            sessions.append({"session": s + 1, "date": dates[s].isoformat(), "turns": turns})
        conversations.append({"id": f"c{c:02d}", "split": split, "speakers": [a, b], "sessions": sessions})

        # Questions: one or two per told event (the kinds it offers), plus one
        # "which came first" per speaker over two of their dated events.
        for r in told:
            e, values, S = r["event"], r["values"], r["speaker"]
            offered = [q for q in e["q"] if q[2] == "say" or "later_turn" in r]
            chosen = rng.sample(offered, min(len(offered), rng.choice([1, 2])))
            chosen += [q for q in offered if q[2] == "both" and q not in chosen]  # every two-turn event asked
            for kind, text, evidence in chosen:
                ev = {"say": [r["say_turn"]], "both": [r["say_turn"], r.get("later_turn")], "later": [r.get("later_turn")]}[evidence]
                q = {"id": f"q{len(questions) + 1:04d}", "conversation": f"c{c:02d}", "split": split, "kind": kind,
                     "question": fill(text, dict(values, S=S)), "evidence": ev, "lexical": text in LEXICAL}
                if kind == "temporal":
                    q["answer"] = r["date"].strftime("%-d %B %Y")
                questions.append(q)
        for speaker in (a, b):
            mine = [r for r in told if r["speaker"] == speaker and temporal_gist(r)]
            if len(mine) >= 2:
                x, y = rng.sample(mine, 2)
                if x["date"] != y["date"]:
                    first = x if x["date"] < y["date"] else y
                    questions.append({
                        "id": f"q{len(questions) + 1:04d}", "conversation": f"c{c:02d}", "split": split, "kind": "temporal",
                        "question": f"Which happened first for {speaker}: {temporal_gist(x)} or {temporal_gist(y)}?",
                        "answer": temporal_gist(first), "evidence": [x["say_turn"], y["say_turn"]],
                    })

    out = {"about": __doc__.strip().splitlines()[0], "conversations": conversations, "questions": questions}
    path = Path(__file__).with_name("conversations.json")
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    if "--stats" in sys.argv:
        for split in ("tune", "heldout"):
            turns = sum(len(s["turns"]) for c in conversations if c["split"] == split for s in c["sessions"])
            qs = [q for q in questions if q["split"] == split]
            kinds = {k: sum(1 for q in qs if q["kind"] == k) for k in ("single-hop", "multi-hop", "temporal", "open-domain")}
            lexical = sum(1 for q in qs if q.get("lexical"))
            print(f"{split}: {turns} turns, {len(qs)} questions {kinds}, {lexical} lexical")


if __name__ == "__main__":
    main()
