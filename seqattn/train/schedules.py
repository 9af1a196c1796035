"""Learning-rate schedules: functions of the number of optimizer steps already taken.

The fit loop sets ``optimizer.lr = schedule(optimizer.steps)`` before each step, so the
schedule's position is the optimizer's step count and resumes with it from a checkpoint.
"""
import math


class WarmupCosine:
    """Linear warmup from lr / warmup_steps to lr over ``warmup_steps``, then a cosine decay to
    ``min_lr`` at ``total_steps`` (held there afterwards).

    Parameters
    ----------
    lr : float
        The peak learning rate, reached at the end of the warmup.
    warmup_steps : int
        Optimizer steps of the warmup, 0 <= warmup_steps < total_steps (0: no warmup).
    total_steps : int
        The step at which the decay reaches ``min_lr``.
    min_lr : float, default 0.0
        The learning rate at and after ``total_steps``.
    """

    def __init__(self, lr, warmup_steps, total_steps, min_lr=0.0):
        if not 0 <= warmup_steps < total_steps:
            raise ValueError(f"need 0 <= warmup_steps < total_steps, got {warmup_steps}, "
                             f"{total_steps}")
        self.lr, self.warmup_steps, self.total_steps, self.min_lr = (lr, warmup_steps,
                                                                     total_steps, min_lr)

    def __call__(self, step):
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        progress = min(1.0, (step - self.warmup_steps) / (self.total_steps - self.warmup_steps))
        return self.min_lr + 0.5 * (self.lr - self.min_lr) * (1.0 + math.cos(math.pi * progress))


def warmup_and_decay(lr, epochs, steps_per_epoch, *, warmup=0.05, final=0.1):
    """The schedule recommended when in doubt: a linear warmup over the first `warmup` fraction
    of the run (at least one step), then a cosine decay that reaches ``final * lr`` at the end
    of the run.

    Pass the result as ``fit(..., schedule=...)`` with the same `lr` given to the optimizer.

    Parameters
    ----------
    lr : float
        The peak learning rate.
    epochs : int
        Epochs of the run.
    steps_per_epoch : int or sized
        Optimizer steps per epoch, or the training batches themselves (their ``len``).
    warmup : float, default 0.05
        The fraction of the run's steps spent warming up, 0 <= warmup < 1.
    final : float, default 0.1
        The learning rate at the end of the run, as a fraction of ``lr``, 0 <= final <= 1.

    Returns
    -------
    WarmupCosine
    """
    if not isinstance(steps_per_epoch, (int, float)):
        steps_per_epoch = len(steps_per_epoch)
    total = int(epochs) * int(steps_per_epoch)
    if total < 2:
        raise ValueError(f"epochs * steps_per_epoch = {epochs} * {steps_per_epoch} = {total}; "
                         "a warmup and a decay need at least 2 steps")
    if not 0 <= warmup < 1 or not 0 <= final <= 1:
        raise ValueError(f"warmup={warmup!r} and final={final!r}; expected 0 <= warmup < 1 and "
                         "0 <= final <= 1 (fractions of the run and of lr)")
    warmup_steps = min(max(1, round(warmup * total)), total - 1)
    return WarmupCosine(lr, warmup_steps, total, min_lr=final * lr)


class StepDecay:
    """lr * gamma ** (step // step_size), as torch's StepLR counted in optimizer steps.

    Parameters
    ----------
    lr : float
        The learning rate of the first ``step_size`` steps.
    step_size : int
        Optimizer steps between two decays, at least 1.
    gamma : float, default 0.1
        The factor applied at each decay.
    """

    def __init__(self, lr, step_size, gamma=0.1):
        if step_size < 1:
            raise ValueError(f"step_size must be at least 1, got {step_size}")
        self.lr, self.step_size, self.gamma = lr, step_size, gamma

    def __call__(self, step):
        return self.lr * self.gamma ** (step // self.step_size)
