"""Make the spoken-digit recordings of examples/spoken_words.py with the espeak-ng synthesiser.

Ten words ("zero" .. "nine") said once by each of 21 synthetic speakers: seven English accents
of espeak-ng, each with its default voice and two variants (+f2, +m3), at a speaking rate and
pitch drawn per recording. Written as 8 kHz 16-bit mono WAV files named
``<speaker>_<word>.wav`` under ``spoken_words/``, silence around each word trimmed, about 1.6 MB in all.

Run once (``apt-get install espeak-ng``): ``python examples/data/make_spoken_words.py``.
"""
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from scipy.io import wavfile
from scipy.signal import resample_poly

WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
ACCENTS = ("en-gb", "en-us", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-rp",
           "en-gb-x-gbcwmd", "en-029")
VARIANTS = ("", "+f2", "+m3")
RATE = 8000


def trimmed(audio, threshold=100, margin=RATE * 30 // 1000):
    """`audio` without the silence espeak-ng puts around a word, keeping 30 ms either side."""
    loud = np.flatnonzero(np.abs(audio) > threshold)
    return audio[max(loud[0] - margin, 0):loud[-1] + margin]


def speakers():
    return [accent + variant for accent in ACCENTS for variant in VARIANTS]


def main(folder=Path(__file__).parent / "spoken_words", seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "word.wav"
        for speaker in speakers():
            for word in WORDS:
                speed, pitch = rng.integers(130, 200), rng.integers(30, 70)
                subprocess.run(["espeak-ng", "-v", speaker, "-s", str(speed), "-p", str(pitch),
                                "-w", str(raw), word], check=True)
                rate, audio = wavfile.read(raw)
                audio = resample_poly(audio.astype(np.float64), RATE, rate)
                audio = np.clip(np.round(audio), -32768, 32767).astype(np.int16)
                audio = trimmed(audio)
                name = speaker.replace("+", "_")
                wavfile.write(folder / f"{name}_{word}.wav", RATE, audio)


if __name__ == "__main__":
    main()
