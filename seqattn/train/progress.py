"""What the fit loop shows while it trains: a tqdm bar per epoch on a terminal, one line per
epoch anywhere else (a log file, a pipe, a notebook), where a bar's carriage returns would flood
the output."""
import sys


def _on_a_terminal(stream):
    return stream is not None and getattr(stream, "isatty", lambda: False)()


class EpochProgress:
    """One epoch's display: ``step`` after each batch, ``close(logs)`` at its end. On a
    terminal (stderr is a tty) the bar counts batches, without a total when the data cannot
    tell its length, and stays as the epoch's line with its logs; elsewhere a line is printed
    when the epoch ends. Nothing is shown when not ``enabled``."""

    def __init__(self, enabled, epoch, epochs, total):
        self.enabled = enabled
        self.title = f"epoch {epoch + 1}/{epochs}"
        self.bar = None
        if enabled and _on_a_terminal(sys.stderr):
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=self.title, file=sys.stderr, leave=True,
                            dynamic_ncols=True)

    def step(self, mean_loss):
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{mean_loss:.4g}", refresh=False)
            self.bar.update(1)

    def close(self, logs=None):
        """End the epoch, showing ``logs``; without logs (an error) just end the bar."""
        summary = None if logs is None else ", ".join(f"{k} {v:.4g}" for k, v in logs.items())
        if self.bar is not None:
            if summary is not None:
                self.bar.set_postfix_str(summary, refresh=False)
            self.bar.close()
        elif self.enabled and summary is not None:
            print(f"{self.title}: {summary}", flush=True)
