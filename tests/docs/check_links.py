#!/usr/bin/env python3
"""CTest docs.links: every Markdown file of the repository stays inside it.

  check_links.py REPO

For each *.md file (outside .git, node_modules and build directories):
- every relative link, [text](path) or ![alt](path), resolves to a file or
  directory inside the repository, and its #anchor (if any) to a heading of
  the Markdown file it names (GitHub's anchor rules);
- no link or bare URL in the prose leaves the repository, except loopback
  addresses (the local server the documents tell you to open) and the few
  sites in ALLOWED;
- no text, code included, points outside the checkout: a ../ path must
  resolve (from the file's folder) to something that exists inside the
  repository, and the checkout's own absolute location never appears.
And README.md is a front door: at most README_MAX_LINES lines.

Prints every problem as FILE:LINE: what, and exits 1 if there is any.
"""
import os
import re
import sys
import unicodedata
from urllib.parse import urlparse

README_MAX_LINES = 250

# Sites a document may link to, each for a reason.
ALLOWED = {
    "keepachangelog.com": "CHANGELOG.md follows its format and says so",
    "mocap.cs.cmu.edu": "the CMU database's credit line its licence asks for",
}
LOOPBACK = {"127.0.0.1", "localhost", "[::1]", "::1"}
SKIP_DIRS = {".git", "node_modules"}


def markdown_files(repo):
    for root, dirs, files in os.walk(repo):
        rel = os.path.relpath(root, repo)
        dirs[:] = sorted(
            d for d in dirs
            if d not in SKIP_DIRS and not d.startswith(".")
            and not (rel == "." and d.startswith("build")))
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(root, name)


def strip_code(text):
    """Text with fenced blocks and inline code blanked (line numbers kept)."""
    out, fence = [], None
    for line in text.split("\n"):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if fence is None and m:
            fence = m.group(1)
            out.append("")
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            out.append("")
            continue
        if line.startswith("    ") or line.startswith("\t"):
            out.append("")  # an indented code block (or a list's deep text)
            continue
        out.append(re.sub(r"`+[^`]*`+", "``", line))
    return "\n".join(out)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"`", "", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    kept = []
    for ch in text:
        if ch in " -_" or unicodedata.category(ch)[0] in "LN":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, counts, fence = set(), {}, False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.lstrip().startswith("```"):
                    fence = not fence
                    continue
                m = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if m:
                    base = slug(m.group(1))
                    n = counts.get(base, 0)
                    counts[base] = n + 1
                    found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def inside(repo, path):
    return os.path.commonpath([repo, os.path.realpath(path)]) == repo


def check_file(repo, path, problems):
    rel = os.path.relpath(path, repo)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    here = os.path.dirname(path)

    def problem(offset_text, line_no, what):
        problems.append(f"{rel}:{line_no}: {what}")

    # 1. Text anywhere (code too) that points outside the checkout.
    parent = os.path.dirname(repo)
    for no, line in enumerate(text.split("\n"), 1):
        if repo in line or (len(parent) > 1 and parent + "/" in line):
            problem(line, no, f"an absolute path of this checkout: {line.strip()[:100]}")
        for m in re.finditer(r"(?<![\w./-])((?:\.\./)+[\w.@+-]*(?:/[\w.@+-]+)*)", line):
            target = os.path.normpath(os.path.join(here, m.group(1)))
            if not inside(repo, target):
                problem(line, no, f"'{m.group(1)}' leaves the repository")
            elif not os.path.exists(target):
                problem(line, no, f"'{m.group(1)}' names nothing in the repository")

    # 2. Links and bare URLs in the prose.
    prose = strip_code(text)
    for no, line in enumerate(prose.split("\n"), 1):
        for m in re.finditer(r"!?\[(?:[^\]]|\](?!\())*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)", line):
            check_target(repo, path, here, m.group(1), no, problem)
        for m in re.finditer(r"<(https?://[^>\s]+)>", line):
            check_target(repo, path, here, m.group(1), no, problem)
        bare = re.sub(r"\]\([^)]*\)", "]()", line)
        for m in re.finditer(r"(?<![<(])\b(https?://[^\s)>\]`'\"]+)", bare):
            check_url(m.group(1), no, problem)
    # Reference-style definitions: [name]: target
    for no, line in enumerate(prose.split("\n"), 1):
        m = re.match(r"^\s{0,3}\[[^\]]+\]:\s+(\S+)", line)
        if m:
            check_target(repo, path, here, m.group(1), no, problem)


def check_url(url, no, problem):
    host = urlparse(url).hostname or ""
    if host in LOOPBACK or host.startswith("127."):
        return
    if host not in ALLOWED:
        problem(url, no, f"a link out of the repository: {url} (allowed: loopback, "
                f"{', '.join(sorted(ALLOWED))})")


def check_target(repo, path, here, target, no, problem):
    if not target:
        problem(target, no, "an empty link")
        return
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
        if target.startswith(("http://", "https://")):
            check_url(target, no, problem)
        else:
            problem(target, no, f"a link that is no file of the repository: {target}")
        return
    if target.startswith("/"):
        problem(target, no, f"an absolute link: {target}")
        return
    file_part, _, anchor = target.partition("#")
    resolved = os.path.normpath(os.path.join(here, file_part)) if file_part else path
    if not inside(repo, resolved):
        problem(target, no, f"'{target}' leaves the repository")
        return
    if not os.path.exists(resolved):
        problem(target, no, f"'{target}': no such file in the repository")
        return
    if anchor:
        if not resolved.endswith(".md"):
            problem(target, no, f"'{target}': an anchor into a file that is not Markdown")
        elif anchor not in anchors(resolved):
            problem(target, no, f"'{target}': no heading with the anchor #{anchor} in "
                    f"{os.path.relpath(resolved, repo)}")


def main():
    repo = os.path.realpath(sys.argv[1])
    problems = []
    files = list(markdown_files(repo))
    for path in files:
        check_file(repo, path, problems)
    with open(os.path.join(repo, "README.md"), encoding="utf-8") as f:
        lines = f.read().rstrip("\n").count("\n") + 1
    if lines > README_MAX_LINES:
        problems.append(f"README.md: {lines} lines; the front door keeps to "
                        f"{README_MAX_LINES} (the reference goes to docs/)")
    for p in problems:
        print(p)
    print(f"docs.links: {len(files)} Markdown files, README.md {lines} lines, "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
