"""corpus.py — the demo's training text, from Debian packages: the King James Bible (bible-kjv, public domain) and
WordNet 3.0's glosses and example sentences (wordnet-base, WordNet 3.0 licence). Besides plain chapters it makes
single-turn chats in the Gemma 4 chat format: what a word means, a word used in a sentence, a verse continued or
quoted. Every choice comes from one seeded generator, so the corpus is the same on every machine."""
import random
import re
import subprocess

WORDNET = "/usr/share/wordnet"
POS = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}


def kjv_chapters():
    """[(book, chapter, [verse texts])] in canonical order, read through the bible program."""
    out = subprocess.run(["bible", "-l", "100000", "-m", "8192", "gen1:1-rev22:21"], check=True,
                         capture_output=True, text=True).stdout
    chapters, cur = [], None
    for line in out.splitlines():
        m = re.match(r"^(\S.*?) (\d+)$", line)
        if m:
            cur = (m.group(1), int(m.group(2)), [])
            chapters.append(cur)
            continue
        m = re.match(r"^\s+(\d+) (.*)$", line)
        if m and cur is not None:
            cur[2].append(m.group(2).strip())
    return chapters


def wordnet_entries():
    """[(lemma, pos, gloss definition, [examples], tagged)] for each lemma's most common sense (index order);
    tagged: the lemma occurs in WordNet's sense-tagged corpus, i.e. it is a common word."""
    synsets = {}
    for pos in POS:
        with open(f"{WORDNET}/data.{pos}", encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                head, _, gloss = line.partition(" | ")
                off = head.split(" ", 1)[0]
                parts = [p.strip() for p in gloss.strip().split(";")]
                defs = [p for p in parts if p and not p.startswith('"')]
                exs = [p.strip('"') for p in parts if p.startswith('"')]
                if defs:
                    synsets[(pos, off)] = (defs[0], exs)
    entries = []
    for pos in POS:
        with open(f"{WORDNET}/index.{pos}", encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                f_ = line.split()
                lemma, n_ptr = f_[0], int(f_[3])
                # lemma pos synset_cnt p_cnt ptrs... sense_cnt tagsense_cnt offsets...
                tagged, first = int(f_[4 + n_ptr + 1]) > 0, f_[4 + n_ptr + 2]
                s = synsets.get((pos, first))
                if s:
                    entries.append((lemma.replace("_", " "), pos, s[0], s[1], tagged))
    return entries


def article(word):
    return "an" if word[0].lower() in "aeiou" else "a"


def definition_chat(rng, lemma, pos, gloss, examples):
    q = rng.choice(["What does {w} mean?", "What does the word {w} mean?", "What is the meaning of {w}?",
                    "Define {w}.", "What does \"{w}\" mean?", "Can you tell me what {w} means?"]).format(w=lemma)
    if pos == "noun" and rng.random() < 0.5:
        q = f"What is {article(lemma)} {lemma}?"
    if pos == "noun" and re.match(r"^(a|an|the|any|one) ", gloss):
        a = f"{article(lemma).capitalize()} {lemma} is {gloss}."
    elif pos == "verb":
        a = f"To {lemma} means to {gloss}."
    else:
        a = f"{lemma[0].upper() + lemma[1:]} means {gloss}."
    ex = [e for e in examples if lemma.lower() in e.lower()]
    if ex and rng.random() < 0.6:
        a += f" For example: \"{ex[0]}\""
    return q, a


def sentence_chat(rng, lemma, examples):
    ex = [e for e in examples if lemma.lower() in e.lower()]
    if not ex:
        return None
    q = rng.choice(["Use {w} in a sentence.", "Give me a sentence with the word {w}.",
                    "Show me how to use \"{w}\"."]).format(w=lemma)
    s = ex[0][0].upper() + ex[0][1:]
    return q, s + ("" if s[-1] in ".!?" else ".")


def verse_chats(rng, book, ch, verses):
    out = []
    for v, text in enumerate(verses, 1):
        r = rng.random()
        words = text.split()
        if r < 0.35 and len(words) >= 8:
            cut = rng.randint(3, len(words) // 2)
            q = rng.choice(["Continue: {t}", "Finish this verse: {t}", "Continue the verse: {t}"])
            out.append((q.format(t=" ".join(words[:cut])), " ".join(words[cut:])))
        elif r < 0.5:
            q = rng.choice(["Quote {b} {c}:{v}.", "What does {b} {c}:{v} say?", "Recite {b} {c}:{v}."])
            out.append((q.format(b=book, c=ch, v=v), text))
    return out


# A few turns about the model itself, so the demo can say what it is.
ABOUT = [
    (["Who are you?", "What are you?", "Hello, who am I talking to?", "What can you do?", "Hi! What are you?"],
     "I am a small demo language model trained for tern on the King James Bible and WordNet. "
     "Ask me what a word means, or give me the start of a verse to continue."),
    (["Hello", "Hi", "Hello!", "Good morning", "Hi there"],
     "Hello! Ask me what a word means, or give me the start of a verse to continue."),
    (["Thank you", "Thanks!", "Thank you very much."], "You are welcome."),
]


def render_chat(q, a):
    """One exchange as the Gemma 4 template renders it with thinking off, then the model's answer."""
    return f"<bos><|turn>user\n{q}<turn|>\n<|turn>model\n<|channel>thought\n<channel|>{a}<turn|>\n"


def held_out_chapter(i):
    return i % 40 == 7


def held_out_lemma(lemma):
    return sum(lemma.encode()) % 50 == 3


def build(seed=1234):
    """Returns (train documents, held-out plain text, held-out chats [(q, a)]). Documents are strings that
    start with <bos>; plain chapters are 'Book N' then the verses, one per line."""
    rng = random.Random(seed)
    docs, held_text, held_chats = [], [], []
    for i, (book, ch, verses) in enumerate(kjv_chapters()):
        text = f"{book} {ch}\n\n" + "\n".join(f"{v} {t}" for v, t in enumerate(verses, 1)) + "\n"
        chats = verse_chats(rng, book, ch, verses)
        if held_out_chapter(i):
            held_text.append(text)
            held_chats.extend(chats[:2])
            continue
        docs.append("<bos>" + text)
        docs.extend(render_chat(q, a) for q, a in chats)
    for lemma, pos, gloss, exs, tagged in wordnet_entries():
        # Common words all; a quarter of the rare ones, so the Bible keeps a fair share of the text.
        if not re.fullmatch(r"[A-Za-z][A-Za-z' -]*", lemma) or (not tagged and rng.random() >= 0.25):
            continue
        q, a = definition_chat(rng, lemma, pos, gloss, exs)
        s = sentence_chat(rng, lemma, exs) if rng.random() < 0.3 else None
        if held_out_lemma(lemma):
            held_chats.append((q, a))
            continue
        docs.append(render_chat(q, a))
        if s:
            docs.append(render_chat(*s))
    for qs, a in ABOUT:
        for q in qs:
            for _ in range(20):
                docs.append(render_chat(q, a))
    rng.shuffle(docs)
    return docs, "\n".join(held_text), held_chats
