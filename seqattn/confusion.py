"""The confusion matrix of a classifier's predictions as a figure (matplotlib, drawn off screen)."""
import numpy as np


def confusion_figure(truth, predicted, classes, path, *, names=None, title="",
                     truth_label="true class", predicted_label="predicted class",
                     counted="samples"):
    """Draw how often each class was predicted as each other and write the figure to ``path``.

    Parameters
    ----------
    truth, predicted : array-like, shape (samples,)
        The true and the predicted label of each sample (any labels that ``classes`` holds:
        integers, strings).
    classes : sequence
        Every label, in the order of the matrix's rows and columns.
    path : str or path-like
        Where the figure is written (its suffix picks the format, e.g. ``.png``).
    names : sequence of str, optional
        What the axes call each class (default: the labels themselves).
    title : str, default ""
        Put before the share of samples predicted right in the figure's title.
    truth_label, predicted_label : str
        The rows' and the columns' axis labels.
    counted : str, default "samples"
        What the colour bar counts.

    Returns
    -------
    numpy.ndarray of int64, shape (classes, classes)
        The counts: row a true class, column a predicted one.

    Raises
    ------
    ValueError
        If ``truth`` and ``predicted`` differ in length, or hold a label ``classes`` lacks.
    """
    truth, predicted = np.asarray(truth), np.asarray(predicted)
    if truth.shape != predicted.shape or truth.ndim != 1:
        raise ValueError(f"truth and predicted must be 1-D and of one length, got shapes "
                         f"{truth.shape} and {predicted.shape}")
    index = {label: i for i, label in enumerate(classes)}
    unknown = sorted({str(label) for label in np.concatenate([truth, predicted])
                      if label not in index})
    if unknown:
        raise ValueError(f"labels {unknown} are not among classes={list(classes)!r}")
    counts = np.zeros((len(index), len(index)), np.int64)
    np.add.at(counts, ([index[t] for t in truth], [index[p] for p in predicted]), 1)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [str(label) for label in classes] if names is None else list(names)
    size = max(4.8, 0.45 * len(names) + 1.4)
    fig, ax = plt.subplots(figsize=(size + 0.8, size), constrained_layout=True)
    image = ax.imshow(counts, cmap="Blues")
    for (row, column), n in np.ndenumerate(counts):
        if n:
            ax.text(column, row, n, ha="center", va="center", fontsize=8,
                    color="white" if n > counts.max() / 2 else "black")
    ax.set_xticks(range(len(names)), names, rotation=45 if len(names) > 4 else 20, ha="right")
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel(predicted_label)
    ax.set_ylabel(truth_label)
    right = np.trace(counts) / max(counts.sum(), 1)
    ax.set_title(f"{title}: {right:.3f} correct" if title else f"{right:.3f} correct")
    fig.colorbar(image, ax=ax, label=counted)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return counts
