"""The progress bar of an estimator's fit: a tqdm bar on stderr over the fit's training steps,
naming the phase that runs ("embedding library", "training Psi", ...) and the last training
loss. A fit that ends within :data:`DELAY_S` seconds prints nothing; ``verbose=False`` on the
estimator turns the bar off (the experiments do: they have a bar over their units).

The bar is cleared when the fit ends (tqdm's ``leave=False``): it shows that a long fit is alive
and how far it has got, while what the fit found stays on the estimator (``timing_`` and the
fitted attributes); fits in a loop (seeds, a sweep, a notebook cell) would otherwise leave one
finished bar per fit on the screen.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Self

DELAY_S = 2.0  # a fit shorter than this prints nothing (tqdm's ``delay``)
STEPLESS_FORMAT = "{desc} [{elapsed}]"  # a phase without training steps: its name and the clock, no count
REDRAW_S = 1.0  # how often a phase without training steps (the embedding) redraws the bar's clock
# which of several fits runs now ("dev fit 1/2"), named on every bar begun inside :func:`labelled`:
# a context variable, so that a caller running two fits in a row (``taskextrap fit``: the dev split's
# RTE, then the final one) names their bars without a new argument on every estimator's ``fit``
_LABEL: ContextVar[str] = ContextVar("fit_label", default="")


@contextmanager
def labelled(label: str) -> Iterator[None]:
    """Name the progress bars of the fits run inside: ``RTE dev fit 1/2: training Psi``."""
    token = _LABEL.set(label)
    try:
        yield
    finally:
        _LABEL.reset(token)


class FitProgress:
    """A fit's progress: the tqdm bar (``verbose``) and the user's ``progress(step, loss)`` callback.

    Use it as a context manager around the fit; :meth:`phase` names what runs now and
    :attr:`callback` is what the training loops are handed (``progress(step, loss)`` every step).

    Args:
        verbose: show the bar (on stderr, once the fit has run :data:`DELAY_S` seconds).
        total: the fit's training steps, all phases together.
        progress: the user's callback of ``fit(library, progress=...)``, or None.
        name: the estimator's name, the bar's prefix (with the label of :func:`labelled`, if any).
    """

    def __init__(self, verbose: bool, total: int, progress=None, name: str = ""):
        self.user = progress
        self.name = " ".join(part for part in (name, _LABEL.get()) if part)
        self.bar: Any = None  # a tqdm bar while verbose
        if verbose:
            from tqdm import tqdm

            self.bar = tqdm(
                total=total,
                desc=self.name,
                unit="step",
                delay=DELAY_S,
                file=sys.stderr,
                dynamic_ncols=True,
                leave=False,
                bar_format=STEPLESS_FORMAT,  # until the first training step (phase)
            )
            # tqdm draws a delayed bar only when a step ends: the embedding has none, so a thread
            # draws it (and ticks its clock) while a phase without steps runs past the delay; the
            # lock keeps its draws and the fit's steps from interleaving
            self._lock = threading.Lock()
            self._closed = threading.Event()
            self._redraw = threading.Thread(target=self._redraw_while_open, daemon=True)
            self._redraw.start()

    @property
    def callback(self):
        """What the training loops call every step: this object when the bar is on, else the
        user's callback as it was given (None: the loops report nothing)."""
        return self if self.bar is not None else self.user

    def __call__(self, step: int, loss: float) -> None:
        """One training step: the bar moves on and shows ``loss``; the user's callback is called."""
        with self._lock:
            self.bar.bar_format = None  # steps run: tqdm's own bar (count, rate, time left) from now on
            self.bar.set_postfix_str(f"loss={loss:.4g}", refresh=False)
            self.bar.update(1)
        if self.user is not None:
            self.user(step, loss)

    def phase(self, description: str) -> None:
        """Name the phase that runs now (redrawn at once when the bar is already shown). Until
        the fit's first training step the bar shows the phase and its clock only: an embedding
        phase is not "0/1000 steps" (the steps are the training's, later)."""
        if self.bar is not None:
            with self._lock:
                self.bar.set_description_str(f"{self.name}: {description}", refresh=False)
                if self.bar.n == 0:  # no training step yet: no "0/N" for steps that come later
                    self.bar.bar_format = STEPLESS_FORMAT
            self._draw_if_due()

    def _draw_if_due(self) -> None:
        """Draw the bar when the fit has run past the delay, and record the draw as tqdm records
        its own (the step count with the time: tqdm's rate is the steps since the last draw over
        the time since it, and closing clears a bar once drawn)."""
        with self._lock:
            bar = self.bar
            now = bar._time()
            if now - bar.start_t >= bar.delay and bar.refresh():
                bar.last_print_n, bar.last_print_t = bar.n, now

    def _redraw_while_open(self) -> None:
        while not self._closed.wait(REDRAW_S):
            self._draw_if_due()

    def close(self) -> None:
        """Stop redrawing and close the bar (a bar never shown leaves nothing behind)."""
        if self.bar is not None:
            self._closed.set()
            self._redraw.join()
            self.bar.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
