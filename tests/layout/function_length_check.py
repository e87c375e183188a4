#!/usr/bin/env python3
"""No function in lib/, formats/, tools/ or python/src/ longer than 80 lines (HACKING.md,
"Layers"): a longer one is split along its steps. Prints the longest functions and every one over
the limit; exits 1 when there is one.

Usage: function_length_check.py REPO_ROOT [LIMIT]

Counting: from the line with a function body's opening brace to the line with its closing brace,
lambdas and nested blocks included. The files are clang-formatted (Google style), so a body is a
brace that follows a parameter list (or a constructor's initialiser list), outside any other
function; comments, strings and raw strings are blanked out before braces are counted.
"""
import pathlib
import re
import sys


def blank_comments_and_strings(source):
    out = []
    i, n = 0, len(source)
    while i < n:
        if source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
        else:
            raw = re.match(r'R"([^(\s]*)\(', source[i:i + 24])
            if raw and (i == 0 or not (source[i - 1].isalnum() or source[i - 1] == "_")):
                end = ")" + raw.group(1) + '"'
                j = source.find(end, i + len(raw.group(0)))
                j = n if j < 0 else j + len(end)
            elif source[i] in "\"'" and not (source[i] == "'" and i > 0 and
                                             source[i - 1].isalnum()):  # 1'000 digit separators
                quote, j = source[i], i + 1
                while j < n and source[j] != quote and source[j] != "\n":
                    j += 2 if source[j] == "\\" else 1
                j += 1
            else:
                out.append(source[i])
                i += 1
                continue
        out.append(re.sub(r"[^\n]", " ", source[i:j]))
        i = j
    return "".join(out)


SIGNATURE_END = re.compile(
    r"\)\s*(const|override|noexcept|final|mutable|&|&&|->\s*[\w:<>,\s*&]+)*\s*$")
INITIALISER = re.compile(r"\)\s*:\s*[\w:]+[({].*$")
CONTROL = re.compile(r"\b(if|for|while|switch|catch)\s*\(.*\)\s*$")
LAMBDA = re.compile(r"\]\s*(\(.*\))?\s*(mutable)?\s*(->.*)?$")


def function_lengths(path):
    lines = blank_comments_and_strings(path.read_text(errors="replace")).split("\n")
    open_blocks = []  # (is a function body, first line)
    lengths = []
    for number, line in enumerate(lines, 1):
        for match in re.finditer(r"[{}]", line):
            if match.group() == "{":
                before = line[:match.start()].strip()
                context = " ".join(l.strip() for l in lines[max(0, number - 4):number - 1])
                context = (context + " " + before).strip()
                is_body = ((SIGNATURE_END.search(context) or INITIALISER.search(context)) and
                           not CONTROL.search(before) and not before.startswith("}") and
                           not LAMBDA.search(before) and
                           not any(body for body, _ in open_blocks))
                open_blocks.append((bool(is_body), number))
            elif open_blocks:
                is_body, first = open_blocks.pop()
                if is_body:
                    lengths.append((number - first + 1, first))
    return lengths


# The library, the formats, the CLI and the Python bindings: every C++ of the project's own.
FOLDERS = ("lib", "formats", "tools", "python/src")


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 80
    found = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in (".cc", ".h", ".cu") and path.is_file():
                for length, line in function_lengths(path):
                    found.append((length, f"{path.relative_to(root).as_posix()}:{line}"))
    found.sort(reverse=True)
    print(f"functions in {', '.join(FOLDERS)}: {len(found)}; the longest:")
    for length, where in found[:5]:
        print(f"  {length:4d} lines  {where}")
    over = [(length, where) for length, where in found if length > limit]
    for length, where in over:
        print(f"over {limit} lines: {where} ({length} lines): split it along its steps")
    if len(found) < 100:
        print("fewer functions than these folders hold: the counting is broken")
        return 1
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
