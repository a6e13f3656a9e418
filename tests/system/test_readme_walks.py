"""The docs' shell walks run as pasted after `make run` (issue 38).

Every shell block of README.md and docs/*.md is a walk unless the line before it says
`<!-- not a walk: why -->`. Per document, the product is started the way `make run` starts
it (scripts/run.sh: a var/ of its own, SQLite, the filesystem broker, a free port), and
its walks run in order in one `bash -e -o pipefail` session in a directory whose `var/`
is that product's (the walks read `var/.env` and `${PORT:-8000}`), with nothing else set.
Each call a walk shows prints its status (`-w ' -> %{http_code}\\n'`) and the doc says
which it is (`# -> 201`): they must agree, walk by walk. Then a SIGTERM to the process
group of `make run` ends all of it within 15 s."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.system.make_run import ROOT, STOP_LIMIT_S, make_run, plain_shell

# The same on every database: CI runs it once, where nothing is set.
pytestmark = pytest.mark.embedded

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = {"sh", "bash", "shell", "console", "zsh"}
NOT_A_WALK = re.compile(r"^<!-- not a walk: (?P<why>\S.*\S) -->$")
SHOWS_STATUS = "-w ' -> %{http_code}\\n'"
EXPECTED = re.compile(r"#\s*->\s*(\d{3})\b")
PRINTED = re.compile(r" -> (\d{3})$", re.M)
# The README's sections that are walks (issue 38 names each).
README_WALKS = (
    "Notifications to people",
    "Digests, throttles and quiet hours",
    "An in-app feed",
    "Status webhooks",
)
WALK_TIMEOUT_S = 300


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence
    lang: str
    text: str
    section: str
    not_a_walk: str | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def expected(self) -> list[int]:
        return [int(code) for code in EXPECTED.findall(self.text)]


def code_blocks(path: Path) -> list[Block]:
    blocks, section, opened = [], "", None
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines, start=1):
        if opened is None:
            if line.startswith("## "):
                section = line[3:].strip()
            elif line.startswith("```"):
                before = lines[number - 2] if number > 1 else ""
                mark = NOT_A_WALK.match(before)
                opened = (number, line[3:].strip(), [], mark and mark.group("why"))
        elif line.startswith("```"):
            start, lang, body, why = opened
            blocks.append(Block(path, start, lang, "\n".join(body) + "\n", section, why))
            opened = None
        else:
            opened[2].append(line)
    assert opened is None, f"{path.name}: a code block opened at line {opened[0]} never closes"
    return blocks


def is_shell(block: Block) -> bool:
    # An unlabelled block with a command line in it counts: a walk cannot hide there.
    return block.lang in SHELLS or (
        block.lang == "" and re.search(r"^\s*(curl|export|KEY=|API=) ", block.text, re.M)
    )


def walks(path: Path) -> list[Block]:
    return [b for b in code_blocks(path) if is_shell(b) and b.not_a_walk is None]


def test_every_shell_block_is_a_walk_that_shows_its_statuses_or_says_why_not():
    problems = []
    for path in DOCUMENTS:
        for block in code_blocks(path):
            if not is_shell(block):
                continue
            if block.lang != "sh":
                problems.append(f"{block.where}: shell blocks are ```sh (the test finds them)")
            if block.not_a_walk is not None:
                continue
            shown = block.text.count(SHOWS_STATUS)
            if not block.expected or shown != len(block.expected):
                problems.append(
                    f"{block.where}: {shown} calls print their status ({SHOWS_STATUS}) but "
                    f"{len(block.expected)} say which (`# -> 201`): one for each, at least one"
                )
            if re.search(r"(localhost|127\.0\.0\.1):8000", block.text):
                problems.append(f"{block.where}: the port is ${{PORT:-8000}}, as make run's")
    assert not problems, "\n".join(problems)


def test_each_readme_walk_is_self_contained():
    """Each of the README's walks sets what it uses (it may be pasted alone): the key
    from var/.env, the API address on make run's port."""
    by_section = {block.section: block for block in walks(ROOT / "README.md")}
    assert set(README_WALKS) <= set(by_section), sorted(by_section)
    for block in by_section.values():
        for name in ("KEY", "API", "AUTH", "JSON"):
            if f"${name}" in block.text or f"${{{name}" in block.text:
                assert re.search(rf"(^|\s){name}=", block.text), (block.where, name)
        assert "var/.env" in block.text and "${PORT:-8000}" in block.text, block.where


def walk_script(blocks: list[Block]) -> str:
    parts = []
    for number, block in enumerate(blocks):
        parts.append(f"echo '@@ walk {number} ({block.where})'")
        parts.append(block.text)
    parts.append("echo '@@ end'")
    return "\n".join(parts) + "\n"


def check_output(blocks: list[Block], output: str) -> list[str]:
    """What disagrees with the docs: a walk that did not run to its end, or a status
    other than the one its doc prints."""
    problems = []
    segments = re.split(r"^@@ walk \d+ \(.*\)$", output, flags=re.M)[1:]
    if "\n@@ end" not in output:
        problems.append("the walks did not run to their end")
    if len(segments) != len(blocks):
        problems.append(f"{len(segments)} of {len(blocks)} walks ran")
    for block, segment in zip(blocks, segments, strict=False):
        printed = [int(code) for code in PRINTED.findall(segment.split("\n@@ end")[0])]
        if printed != block.expected:
            problems.append(f"{block.where}: the doc says {block.expected}, got {printed}")
    return problems


def needs(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing and os.environ.get("CI"):
        pytest.fail(f"the walks need {missing} (README, 'Trying it')")
    if missing:
        pytest.skip(f"the walks need {missing}")


@pytest.mark.parametrize(
    "document",
    [path.relative_to(ROOT).as_posix() for path in DOCUMENTS if walks(path)],
)
def test_the_walks_run_as_pasted_after_make_run(document, tmp_path):
    needs("curl", "jq", "ps")
    blocks = walks(ROOT / document)
    script = tmp_path / "walks.sh"
    script.write_text(walk_script(blocks))
    # A second shell at the root of a checkout whose var/ is this product's.
    env = plain_shell(tmp_path / "var", PORT="0")
    for name in ("KEY", "API", "AUTH", "JSON", "TOKEN", "ID", "BATCH", "ETAG", "ENDPOINT"):
        env.pop(name, None)
    del env["PY"], env["NOTIFYFLOW_VAR_DIR"]
    with make_run(tmp_path / "var") as product:
        env["PORT"] = str(product.port)
        result = subprocess.run(
            ["bash", "-e", "-o", "pipefail", str(script)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=WALK_TIMEOUT_S,
        )
        problems = check_output(blocks, result.stdout)
        if result.returncode != 0:
            problems.insert(0, f"bash exited {result.returncode}")
        assert not problems, (
            "\n".join(problems) + f"\n--- walks:\n{result.stdout}\n--- make run:\n"
            f"{product.output()[-4000:]}"
        )
        took = product.stop(signal.SIGTERM)
        assert took < STOP_LIMIT_S, f"make run took {took:.1f} s to stop:\n{product.output()}"
