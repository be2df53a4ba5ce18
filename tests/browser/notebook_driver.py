"""Drive a notebook in a real JupyterLab from Playwright: write it, open it, run a cell and read what it shows.

A cell has run when its prompt shows an execution count it did not show before (``[*]`` while it
runs); the output is read from the page, as the user sees it, never from the kernel.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

KERNEL_NAME = "Python 3 (ipykernel)"


def write_notebook(path: Path, cells: list[str]) -> None:
    """Code cells with no outputs, as a user would open them."""
    body = [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": f"c{i}",
            "metadata": {},
            "outputs": [],
            "source": src,
        }
        for i, src in enumerate(cells)
    ]
    nb = {
        "cells": body,
        "metadata": {"kernelspec": {"display_name": KERNEL_NAME, "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))


class NotebookPage:
    """One open notebook tab."""

    def __init__(self, page: Any, url: str, token: str, name: str) -> None:
        self.page, self.name = page, name
        page.goto(f"{url}/lab/tree/{name}?token={token}&reset", timeout=60_000)
        self.wait_kernel_idle()

    def wait_kernel_idle(self, timeout: float = 60) -> None:
        self.page.locator(".jp-Notebook").first.wait_for(timeout=timeout * 1000)
        # the notebook's own toolbar (the running-sessions panel also lists kernel names, hidden)
        self.page.locator(".jp-NotebookPanel-toolbar").get_by_text(KERNEL_NAME).first.wait_for(
            timeout=timeout * 1000
        )
        self.page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(
            timeout=timeout * 1000
        )

    def cell(self, index: int) -> Any:
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)

    def prompt(self, index: int) -> str:
        return str(self.cell(index).locator(".jp-InputPrompt").inner_text()).strip()

    def start(self, index: int) -> str:
        """Run a cell and return at once (its prompt before the run, for :meth:`wait`)."""
        before = self.prompt(index)
        self.cell(index).locator(".jp-InputArea-editor").click()
        self.page.keyboard.press("Control+Enter")
        return before

    def wait(self, index: int, before: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        running_seen = False  # a restarted kernel counts from 1 again: [1] -> [*] -> [1]
        while True:
            now = self.prompt(index)
            running_seen = running_seen or "*" in now
            if re.search(r"\[\d+\]", now) and (now != before or running_seen):
                return self.output_text(index)
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"cell {index} still running after {timeout} s (prompt {now!r}); "
                    f"it shows: {self.output_text(index)[-1500:]!r}"
                )
            time.sleep(0.2)

    def run(self, index: int, timeout: float = 60) -> str:
        """Run a cell, wait for it to finish, return the text its output area shows."""
        return self.wait(index, self.start(index), timeout)

    def output(self, index: int) -> Any:
        # the cell's own output area: the panel holds an ipywidgets Output (its time warnings), itself a
        # .jp-OutputArea nested inside, which the first match in document order never is
        return self.cell(index).locator(".jp-OutputArea").first

    def output_text(self, index: int) -> str:
        out = self.output(index)
        return str(out.inner_text()) if out.count() else ""

    def interrupt(self) -> None:
        """What a user does for Ctrl-C in a notebook: Esc, then I, I."""
        self.page.keyboard.press("Escape")
        self.page.keyboard.press("i")
        self.page.keyboard.press("i")

    def save(self) -> None:
        self.page.keyboard.press("Control+s")
        time.sleep(1.0)
