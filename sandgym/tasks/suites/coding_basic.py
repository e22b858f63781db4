"""Coding families of one small function each: ``strings``, ``lists`` and ``numbers``.

Level 1 is a one-line function (``reverse(s)``, ``add_one(x)``); levels 2 and 3 need a loop or a little
algorithm. Templates marked ``split="heldout"`` are never drawn for training instances.
"""

from __future__ import annotations

import random

from sandgym.tasks.suites.base import FamilySpec, Template, ints, sentence, template_family, with_traps, word
from sandgym.tasks.suites.traps import BIG


def _w(rng: random.Random) -> tuple[str]:
    return (word(rng),)


def _w1(rng: random.Random) -> tuple[str]:
    return (word(rng, 1),)


def _sent(rng: random.Random) -> tuple[str]:
    return (sentence(rng),)


def _pal(rng: random.Random) -> tuple[str]:
    w = word(rng)
    return (rng.choice([w, w + w[::-1], w + w[-2::-1], w]),)


def _runs(rng: random.Random) -> tuple[str]:
    return ("".join(rng.choice("aab") * rng.randint(1, 4) for _ in range(rng.randint(0, 5))),)


def _camel(rng: random.Random) -> tuple[str]:
    parts = [rng.choice(WORDS_SHORT) for _ in range(rng.randint(1, 4))]
    return (parts[0] + "".join(p.capitalize() for p in parts[1:]),)


WORDS_SHORT = ("parse", "http", "request", "get", "user", "name", "load", "file", "to", "json", "max", "value")

STRINGS = {
    1: [
        Template("reverse", ("reverse", "reverse_string", "backwards"), "s: str", "str",
                 "Return s reversed.", "    return s[::-1]", _w),
        Template("upper", ("to_upper", "shout", "upper_case"), "s: str", "str",
                 "Return s in upper case.", "    return s.upper()", _w),
        Template("vowels", ("count_vowels", "vowel_count", "num_vowels"), "s: str", "int",
                 "Return how many characters of s are vowels (a, e, i, o, u).",
                 '    return sum(1 for c in s if c in "aeiou")', _w),
        Template("suffix", ("add_suffix", "append_tail"), "s: str", "str",
                 "Return s followed by {suffix!r}.", "    return s + {suffix!r}", _w,
                 knobs=lambda r: {"suffix": r.choice(["!", "_x", "ing", "-ok", "s"])}),
        Template("lower", ("to_lower", "whisper", "lower_case"), "s: str", "str",
                 "Return s in lower case.", "    return s.lower()", lambda r: (word(r).upper(),)),
        Template("strip", ("strip_spaces", "trim"), "s: str", "str",
                 "Return s without spaces at its start and end.", "    return s.strip()",
                 lambda r: (" " * r.randint(0, 2) + word(r) + " " * r.randint(0, 2),)),
        Template("last", ("last_char", "last_letter"), "s: str", "str",
                 "Return the last character of s (s is never empty).", "    return s[-1]", _w1),
        Template("double", ("double", "twice", "repeat_twice"), "s: str", "str",
                 "Return s written twice in a row.", "    return s + s", _w, split="heldout"),
        Template("first", ("first_char", "first_letter", "head_char"), "s: str", "str",
                 "Return the first character of s (s is never empty).", "    return s[0]", _w1,
                 split="heldout"),
        Template("length", ("length", "str_len", "size_of"), "s: str", "int",
                 "Return the number of characters in s.", "    return len(s)", _w, split="heldout"),
    ],
    2: [
        Template("palindrome", ("is_palindrome", "reads_same_backwards"), "s: str", "bool",
                 "Return True if s reads the same forwards and backwards.", "    return s == s[::-1]", _pal),
        Template("count_char", ("count_char", "occurrences"), "s: str", "int",
                 "Return how many times the character {c!r} appears in s.", "    return s.count({c!r})", _sent,
                 knobs=lambda r: {"c": r.choice("aeinort")}),
        Template("repeat_chars", ("repeat_chars", "stretch"), "s: str", "str",
                 "Return s with every character repeated {k} times.",
                 '    return "".join(c * {k} for c in s)', _w, knobs=lambda r: {"k": r.randint(2, 3)}),
        Template("title", ("capitalize_words", "title_words"), "s: str", "str",
                 "Return s with the first letter of every word in upper case (words are separated by spaces).",
                 '    return " ".join(w[:1].upper() + w[1:] for w in s.split(" "))', _sent, split="heldout"),
        Template("no_vowels", ("remove_vowels", "strip_vowels"), "s: str", "str",
                 "Return s without its vowels (a, e, i, o, u).",
                 '    return "".join(c for c in s if c not in "aeiou")', _sent, split="heldout"),
        Template("longest", ("longest_word", "biggest_word"), "s: str", "str",
                 "Return the longest word of s (words are separated by spaces; the first one on ties).",
                 "    return max(s.split(), key=len)", _sent, split="heldout"),
    ],
    3: [
        Template("rle", ("run_length", "rle_encode"), "s: str", "str",
                 "Return the run-length encoding of s: each run of a repeated character becomes the character "
                 "followed by the run length, e.g. 'aaab' -> 'a3b1'.",
                 "    out = []\n    i = 0\n    while i < len(s):\n        j = i\n"
                 "        while j < len(s) and s[j] == s[i]:\n            j += 1\n"
                 "        out.append(s[i] + str(j - i))\n        i = j\n    return ''.join(out)", _runs),
        Template("caesar", ("caesar", "shift_letters"), "s: str", "str",
                 "Shift every lowercase letter of s forward by {k} places in the alphabet (z wraps to a); "
                 "leave other characters unchanged.",
                 "    return ''.join(chr((ord(c) - 97 + {k}) % 26 + 97) if 'a' <= c <= 'z' else c for c in s)",
                 _sent, knobs=lambda r: {"k": r.randint(1, 25)}),
        Template("most_common", ("most_common_char", "top_char"), "s: str", "str",
                 "Return the most frequent character of s (never empty); on ties, the one that appears first.",
                 "    return max(s, key=lambda c: (s.count(c), -s.index(c)))", _w, split="heldout"),
        Template("snake", ("camel_to_snake", "to_snake_case"), "s: str", "str",
                 "Convert a camelCase identifier to snake_case, e.g. 'parseHttpRequest' -> 'parse_http_request'.",
                 "    return ''.join('_' + c.lower() if c.isupper() else c for c in s)", _camel,
                 split="heldout"),
    ],
}


def _xs(rng: random.Random) -> tuple[list[int]]:
    return (ints(rng),)


def _xs1(rng: random.Random) -> tuple[list[int]]:
    return (ints(rng, lo=1),)


def _words(rng: random.Random) -> tuple[list[str]]:
    return ([word(rng) for _ in range(rng.randint(0, 5))],)


def _nested(rng: random.Random) -> tuple[list[list[int]]]:
    return ([ints(rng, hi=3) for _ in range(rng.randint(0, 4))],)


def _two_counts(rng: random.Random) -> tuple[dict[str, int], dict[str, int]]:
    keys = "abcde"
    return tuple({rng.choice(keys): rng.randint(1, 9) for _ in range(rng.randint(0, 3))} for _ in "xy")  # type: ignore[return-value]


LISTS = {
    1: [
        Template("sum", ("sum_list", "total"), "xs: list[int]", "int", "Return the sum of xs.",
                 "    return sum(xs)", _xs),
        Template("max", ("max_of", "largest"), "xs: list[int]", "int",
                 "Return the largest number in xs (xs is never empty).", "    return max(xs)", _xs1),
        Template("double_all", ("double_all", "times_two"), "xs: list[int]", "list[int]",
                 "Return a new list with every number of xs doubled.", "    return [x * 2 for x in xs]", _xs),
        Template("count", ("count_items", "how_many"), "xs: list[int]", "int",
                 "Return the number of items in xs.", "    return len(xs)", _xs),
        Template("reverse", ("reverse_list", "backwards_list"), "xs: list[int]", "list[int]",
                 "Return the items of xs in reverse order.", "    return xs[::-1]", _xs),
        Template("sorted", ("sort_numbers", "ascending"), "xs: list[int]", "list[int]",
                 "Return the items of xs sorted from smallest to largest.", "    return sorted(xs)", _xs),
        Template("first", ("first_item", "head"), "xs: list[int]", "int",
                 "Return the first item of xs (xs is never empty).", "    return xs[0]", _xs1, split="heldout"),
        Template("min", ("min_of", "smallest"), "xs: list[int]", "int",
                 "Return the smallest number in xs (xs is never empty).", "    return min(xs)", _xs1,
                 split="heldout"),
        Template("squares", ("square_all", "squares"), "xs: list[int]", "list[int]",
                 "Return a new list with the square of every number of xs.", "    return [x * x for x in xs]", _xs,
                 split="heldout"),
        Template("last", ("last_item", "tail_item"), "xs: list[int]", "int",
                 "Return the last item of xs (xs is never empty).", "    return xs[-1]", _xs1, split="heldout"),
    ],
    2: [
        Template("dedupe", ("remove_duplicates", "unique"), "xs: list[int]", "list[int]",
                 "Return xs without repeated items, keeping the first occurrence of each, in order.",
                 "    return list(dict.fromkeys(xs))", _xs),
        Template("running", ("running_sum", "prefix_sums"), "xs: list[int]", "list[int]",
                 "Return the running totals of xs, e.g. [1, 2, 3] -> [1, 3, 6].",
                 "    out, total = [], 0\n    for x in xs:\n        total += x\n        out.append(total)\n"
                 "    return out", _xs),
        Template("above", ("keep_above", "filter_above"), "xs: list[int]", "list[int]",
                 "Return the items of xs greater than {k}, in order.", "    return [x for x in xs if x > {k}]",
                 _xs, knobs=lambda r: {"k": r.randint(0, 9)}),
        Template("lengths", ("word_lengths", "length_map"), "words: list[str]", "dict[str, int]",
                 "Return a dict mapping each word of words to its length.",
                 "    return {{w: len(w) for w in words}}", _words, split="heldout"),
        Template("counts", ("count_occurrences", "tally"), "xs: list[int]", "dict[int, int]",
                 "Return a dict mapping each distinct item of xs to how many times it occurs.",
                 "    out = {{}}\n    for x in xs:\n        out[x] = out.get(x, 0) + 1\n    return out", _xs,
                 split="heldout"),
    ],
    3: [
        Template("chunk", ("chunk", "split_into_groups"), "xs: list[int]", "list[list[int]]",
                 "Split xs into consecutive groups of {k} items (the last group may be shorter).",
                 "    return [xs[i:i + {k}] for i in range(0, len(xs), {k})]", _xs,
                 knobs=lambda r: {"k": r.randint(2, 4)}),
        Template("flatten", ("flatten", "concat_lists"), "xss: list[list[int]]", "list[int]",
                 "Return the items of the lists in xss concatenated into one list, in order.",
                 "    return [x for xs in xss for x in xs]", _nested),
        Template("rotate", ("rotate_left", "rotate"), "xs: list[int]", "list[int]",
                 "Return xs rotated left by {k} places (wrapping around; an empty list stays empty).",
                 "    if not xs:\n        return []\n    k = {k} % len(xs)\n    return xs[k:] + xs[:k]", _xs,
                 knobs=lambda r: {"k": r.randint(1, 7)}, split="heldout"),
        Template("merge", ("merge_counts", "add_counts"), "a: dict[str, int], b: dict[str, int]",
                 "dict[str, int]",
                 "Return a new dict with the keys of a and b; values of keys in both are added.",
                 "    out = dict(a)\n    for k, v in b.items():\n        out[k] = out.get(k, 0) + v\n    return out",
                 _two_counts, split="heldout"),
    ],
}


def _n(rng: random.Random) -> tuple[int]:
    return (rng.randint(-20, 50),)


def _nat(rng: random.Random) -> tuple[int]:
    return (rng.randint(0, 12),)


def _pos(rng: random.Random) -> tuple[int]:
    return (rng.randint(1, 400),)


def _pair(rng: random.Random) -> tuple[int, int]:
    k = rng.randint(1, 9)
    return (k * rng.randint(1, 12), k * rng.randint(1, 12))


NUMBERS = {
    1: [
        Template("add_one", ("add_one", "increment", "plus_one"), "x: int", "int", "Return x + 1.",
                 "    return x + 1", _n),
        Template("add_k", ("add_{k}", "plus_{k}"), "x: int", "int", "Return x + {k}.", "    return x + {k}", _n,
                 knobs=lambda r: {"k": r.randint(2, 9)}),
        Template("square", ("square", "squared"), "x: int", "int", "Return x * x.", "    return x * x", _n),
        Template("is_even", ("is_even", "even"), "x: int", "bool", "Return True if x is even.",
                 "    return x % 2 == 0", _n),
        Template("triple", ("triple", "times_three"), "x: int", "int", "Return x * 3.", "    return x * 3", _n),
        Template("abs", ("absolute", "magnitude"), "x: int", "int", "Return the absolute value of x.",
                 "    return abs(x)", _n),
        Template("is_positive", ("is_positive", "above_zero"), "x: int", "bool", "Return True if x > 0.",
                 "    return x > 0", _n, split="heldout"),
        Template("double", ("double", "times_two"), "x: int", "int", "Return x * 2.", "    return x * 2", _n,
                 split="heldout"),
        Template("negate", ("negate", "flip_sign"), "x: int", "int", "Return -x.", "    return -x", _n,
                 split="heldout"),
        Template("sub_k", ("minus_{k}", "subtract_{k}"), "x: int", "int", "Return x - {k}.",
                 "    return x - {k}", _n, knobs=lambda r: {"k": r.randint(2, 9)}, split="heldout"),
    ],
    2: [
        Template("factorial", ("factorial", "fact"), "n: int", "int", "Return n! (n >= 0; 0! is 1).",
                 "    out = 1\n    for i in range(2, n + 1):\n        out *= i\n    return out", _nat),
        Template("digits", ("sum_digits", "digit_sum"), "n: int", "int",
                 "Return the sum of the decimal digits of n (n >= 0).", "    return sum(int(c) for c in str(n))",
                 _pos),
        Template("fib", ("fib", "fibonacci"), "n: int", "int",
                 "Return the n-th Fibonacci number, with fib(0) == 0 and fib(1) == 1.",
                 "    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a", _nat),
        Template("gcd", ("gcd", "greatest_common_divisor"), "a: int, b: int", "int",
                 "Return the greatest common divisor of a and b (both positive).",
                 "    while b:\n        a, b = b, a % b\n    return a", _pair, split="heldout"),
        Template("prime", ("is_prime", "prime"), "n: int", "bool", "Return True if n is a prime number.",
                 "    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))", _pos, split="heldout"),
    ],
    3: [
        Template("factors", ("prime_factors", "factorize"), "n: int", "list[int]",
                 "Return the prime factors of n (n >= 2) in increasing order, with repeats, e.g. 12 -> [2, 2, 3].",
                 "    out, d = [], 2\n    while d * d <= n:\n        while n % d == 0:\n            out.append(d)\n"
                 "            n //= d\n        d += 1\n    if n > 1:\n        out.append(n)\n    return out",
                 lambda r: (r.randint(2, 500),)),
        Template("collatz", ("collatz_steps", "steps_to_one"), "n: int", "int",
                 "Return how many Collatz steps take n (n >= 1) to 1: n -> n // 2 if n is even, else 3n + 1.",
                 "    steps = 0\n    while n != 1:\n        n = n // 2 if n % 2 == 0 else 3 * n + 1\n"
                 "        steps += 1\n    return steps", _pos),
        Template("binary", ("to_binary", "binary_string"), "n: int", "str",
                 "Return the binary representation of n (n >= 0) without a prefix, e.g. 5 -> '101'.",
                 "    return bin(n)[2:]", lambda r: (r.randint(0, 300),), split="heldout"),
        Template("droot", ("digital_root", "repeated_digit_sum"), "n: int", "int",
                 "Sum the digits of n (n >= 0) repeatedly until one digit is left, and return it.",
                 "    while n >= 10:\n        n = sum(int(c) for c in str(n))\n    return n",
                 lambda r: (r.randint(0, 99999),), split="heldout"),
    ],
}


STRINGS = with_traps(STRINGS, {
    "upper": (("",), ("ñandú über",), ("straße",)),
    "vowels": (("",), ("rhythm",), ("queueing",)),
    "strip": (("",), ("   ",), ("  two words  ",)),
    "last": (("a",), ("ñ",), ("abcé",)),
    "first": (("a",), ("ñu",)),
    "palindrome": (("",), ("a",), ("ésé",), ("ab ab",), ("abca",)),
    "title": (("",), ("a  b",), ("iPhone xBox",), ("élan vital",)),
    "longest": (("a",), ("bb a cc",), ("ünïcode x",)),
    "rle": (("",), ("a" * 12,), ("ééa",)),
    "caesar": (("",), ("zzz",), ("Hello, World! é",)),
    "most_common": (("a",), ("abab",), ("éée",)),
    "snake": (("x",), ("aB",), ("valueA1",)),
})
_NONEMPTY = (([7],), ([3, 3, 3],), ([BIG, -BIG, BIG],), ([-5, -1, -9],))
LISTS = with_traps(LISTS, {"max": _NONEMPTY, "min": _NONEMPTY, "first": _NONEMPTY, "last": _NONEMPTY})
NUMBERS = with_traps(NUMBERS, {
    "factorial": ((0,), (1,), (25,)),
    "digits": ((0,), (10**30 + 7,)),
    "fib": ((0,), (1,), (90,)),
    "gcd": ((1, 1), (7, 7), (10**18, 10**12), (13, 1)),
    "prime": ((0,), (1,), (2,), (-7,), (7919,), (2**31 - 1,)),
    "factors": ((2,), (97,), (2**20,), (999983 * 2,)),
    "collatz": ((1,), (27,)),
    "binary": ((0,), (1,), (2**70,)),
    "droot": ((0,), (9,), (10**20 - 1,)),
})

FAMILIES = [
    FamilySpec("strings", "coding", "string transforms (reverse, count vowels, run-length encoding, ...)", False,
               template_family("strings", STRINGS)),
    FamilySpec("lists", "coding", "list and dict processing (sum, dedupe, chunk, merge counts, ...)", False,
               template_family("lists", LISTS)),
    FamilySpec("numbers", "coding", "arithmetic and number theory (add_one, gcd, prime factors, ...)", False,
               template_family("numbers", NUMBERS)),
]
