"""Training: losses, optimizers, schedules, clipping, the fit loop and checkpoints."""
from .batches import ArrayBatches, IterableBatches, TrainingBatch
from .checkpoints import has_checkpoint, load_average, load_checkpoint, save_checkpoint
from .clipping import clip_factor, global_grad_norm
from .distributed import DataParallel
from .early_stopping import EarlyStopping
from .expert_weights import ExpertWeights, choose_expert_weights, weigh_experts
from .force_matching import EnergyForceLoss
from .property_loss import PropertyLoss
from .fit import FitState, NonFiniteLossError, evaluate, fit
from .losses import (BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, LatitudeWeightedMSELoss,
                     MAELoss, MSELoss)
from .optimizers import SGD, Adam, AdamW
from .schedules import StepDecay, WarmupCosine, warmup_and_decay
from .weight_average import EMA

__all__ = [
    "Adam", "AdamW", "ArrayBatches", "BCEWithLogitsLoss", "CrossEntropyLoss", "DataParallel",
    "EMA", "EarlyStopping",
    "EnergyForceLoss", "FitState", "HuberLoss", "IterableBatches", "LatitudeWeightedMSELoss", "MAELoss", "MSELoss",
    "NonFiniteLossError", "PropertyLoss", "SGD", "StepDecay", "TrainingBatch", "WarmupCosine", "clip_factor",
    "evaluate", "fit", "global_grad_norm", "has_checkpoint", "load_average", "load_checkpoint", "save_checkpoint",
    "warmup_and_decay",
]
__all__ += ["ExpertWeights", "choose_expert_weights", "weigh_experts"]
