"""A generated news corpus for TCE formation: several stories, each covered every day for months,
interleaved in time, each article labelled with its story. The sentences are templates filled
with each story's own people, places and events, mixed with wire-copy filler that every story
shares; a story moves through phases (new events, new words) as real coverage does."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from typing import Any

from udfs.ids import stable_id


@dataclass(frozen=True)
class Story:
    name: str
    start: dt.date
    days: int
    people: tuple[str, ...]
    places: tuple[str, ...]
    phases: tuple[tuple[str, ...], ...]  # each phase's events, in order


STORIES = (
    Story(
        "flood",
        dt.date(2021, 1, 4),
        120,
        ("Governor Lena Ortiz", "engineer Samuel Reyes", "mayor Tomas Villar"),
        ("the Riverside district", "Lake Marrow dam", "the valley towns"),
        (
            ("heavy rain swelled the river", "levees were breached", "families were evacuated by boat"),
            ("floodwater reached the hospital", "shelters ran short of drinking water", "crops were lost"),
            ("the river began to recede", "crews pumped water from basements", "mud covered the roads"),
            ("rebuilding grants were approved", "insurers assessed the flood damage", "schools reopened"),
        ),
    ),
    Story(
        "election",
        dt.date(2021, 1, 20),
        110,
        ("candidate Marta Kowal", "incumbent president Ivo Brandt", "electoral commissioner Anna Petrov"),
        ("the capital's polling stations", "the northern provinces", "the national assembly"),
        (
            (
                "campaign rallies drew large crowds",
                "the candidates debated taxes",
                "polls showed a tight race",
            ),
            ("voters queued at ballot boxes", "turnout passed sixty percent", "observers monitored the vote"),
            ("the ballot count was disputed", "a recount was ordered", "opposition supporters protested"),
            (
                "the new president was sworn in",
                "ministers of the cabinet were named",
                "the parliament convened",
            ),
        ),
    ),
    Story(
        "strike",
        dt.date(2021, 2, 8),
        100,
        ("union leader Paul Henning", "transport minister Clara Duval", "railway chief Omar Haddad"),
        ("the central railway stations", "the freight depots", "the commuter lines"),
        (
            ("rail workers walked out over wages", "trains were cancelled nationwide", "picket lines formed"),
            ("negotiators met for pay talks", "the union rejected the offer", "commuters faced long delays"),
            ("an arbitration panel was appointed", "freight shortages hit factories", "the strike widened"),
            ("a wage deal was signed", "trains resumed their timetable", "union members ratified the pact"),
        ),
    ),
    Story(
        "port strike",
        dt.date(2021, 2, 1),
        105,
        ("dockers' spokesman Jonas Berg", "harbour master Ines Moreau", "shipping minister Felix Obi"),
        ("the container terminals", "the harbour quays", "the southern port"),
        (
            ("dock workers walked out over wages", "ships queued outside the port", "picket lines formed"),
            ("negotiators met for pay talks", "the union rejected the offer", "cargo piled up on the quays"),
            ("an arbitration panel was appointed", "fuel shortages hit the islands", "the strike widened"),
            ("a wage deal was signed", "cranes resumed loading ships", "union members ratified the pact"),
        ),
    ),
    Story(
        "outbreak",
        dt.date(2021, 1, 12),
        115,
        ("health minister Ruth Adeyemi", "epidemiologist Karl Jensen", "doctor Priya Natarajan"),
        ("the coastal clinics", "the city's intensive care wards", "the vaccination centres"),
        (
            (
                "a cluster of fever cases was reported",
                "laboratories identified the virus",
                "clinics were crowded",
            ),
            ("infections doubled within a week", "masks became mandatory indoors", "hospitals added beds"),
            ("vaccine doses arrived by air", "nurses began immunising the elderly", "case numbers levelled"),
            ("restrictions on gatherings were lifted", "the outbreak was declared over", "an inquiry began"),
        ),
    ),
    Story(
        "wildfire",
        dt.date(2021, 2, 22),
        95,
        ("fire chief Dana Whitlock", "forestry officer Miguel Santos", "ranger Ellen Frost"),
        ("the pine forests", "the hillside villages", "the national park"),
        (
            ("lightning sparked a blaze", "dry winds spread the flames", "smoke covered the sky"),
            (
                "firefighters dropped retardant from planes",
                "villagers fled the advancing fire",
                "homes burned",
            ),
            ("containment lines held overnight", "rain helped crews control the fire", "embers smouldered"),
            (
                "burned slopes were replanted",
                "the park reopened to hikers",
                "investigators studied the cause",
            ),
        ),
    ),
)

FILLER = (
    "Officials said more details would be released in the coming days.",
    "The situation remained fluid on {weekday}, according to people familiar with the matter.",
    "Local media carried live coverage throughout the day.",
    "A spokesperson declined to comment further when contacted by reporters.",
    "Analysts cautioned that it was too early to draw firm conclusions.",
    "Residents shared photographs and videos on social media.",
)
TEMPLATES = (
    "{Event} in {place}, {person} said on {weekday}.",
    "{Person} told reporters that {event} and that more help was needed in {place}.",
    "In {place}, {event}, while {person} urged calm.",
    "Reports from {place} confirmed that {event}.",
    "{Person} visited {place} after {event}.",
    "According to {person}, {event} near {place} earlier this week.",
)


def _sentence(rng: random.Random, story: Story, phase: tuple[str, ...], day: dt.date) -> str:
    events = phase if rng.random() < 0.5 else rng.choice(story.phases)  # coverage drifts, slowly
    person, place, event = rng.choice(story.people), rng.choice(story.places), rng.choice(events)
    text = rng.choice(TEMPLATES).format(
        event=event,
        Event=event[0].upper() + event[1:],
        place=place,
        person=person,
        Person=person[0].upper() + person[1:],
        weekday=day.strftime("%A"),
    )
    return text


def articles(seed: int = 0, per_day: tuple[int, int] = (1, 3)) -> list[dict[str, Any]]:
    """One dict per article: ``article_id, title, text, published_at, story``, every story covered
    on each of its days by ``per_day`` articles (inclusive bounds), in no particular order."""
    rng = random.Random(seed)
    out = []
    for story in STORIES:
        for offset in range(story.days):
            day = story.start + dt.timedelta(days=offset)
            phase = story.phases[offset * len(story.phases) // story.days]
            for n in range(rng.randint(*per_day)):
                sentences = [_sentence(rng, story, phase, day) for _ in range(8)]
                for _ in range(3):
                    filler = rng.choice(FILLER).format(weekday=day.strftime("%A"))
                    sentences.insert(rng.randrange(len(sentences) + 1), filler)
                at = dt.datetime.combine(day, dt.time(6 + n * 3, rng.randrange(60)), dt.UTC)
                out.append(
                    {
                        "article_id": stable_id("story", story.name, day.isoformat(), str(n)),
                        "title": sentences[0].rstrip("."),
                        "text": " ".join(sentences),
                        "published_at": at,
                        "story": story.name,
                    }
                )
    return out
