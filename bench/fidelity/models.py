"""Small Keras models for the fidelity bench: real training compute, small enough for a 2-core CPU.

Each builder takes the sample shape (height, width, channels) and returns a compiled model whose input is the
uint8 batch the input pipeline delivers (scaling to [0, 1] is the model's first layer) and whose labels are
integer classes (sparse categorical cross-entropy). ``python -m experiments.calibrate --model
bench/fidelity/models.py:deepgalaxy_cnn --batch 8 --shape 512,512,3`` measures their compute per batch.

These models know nothing of ddlio: they import only Keras.
"""

from __future__ import annotations

from typing import Any

CLASSES = 10  # as many as ddlio's label layouts use (labels i % 10)


def _compile(model: Any) -> Any:
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def deepgalaxy_cnn(shape: tuple[int, ...] = (512, 512, 3)) -> Any:
    """A DeepGalaxy-like image classifier (galaxy-merger stages from 512x512 RGB images), shrunk for a CPU: a
    strided stem that downsamples early, two convolutions, global pooling, a softmax over merger classes."""
    import keras
    from keras import layers

    return _compile(keras.Sequential([
        keras.Input(shape=tuple(shape), dtype="uint8"),
        layers.Rescaling(1.0 / 255),
        layers.Conv2D(8, 5, strides=4, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Conv2D(16, 3, strides=2, activation="relu"),
        layers.Conv2D(32, 3, strides=2, activation="relu"),
        layers.GlobalAveragePooling2D(),
        layers.Dense(CLASSES, activation="softmax"),
    ], name="deepgalaxy_cnn"))


def record_cnn(shape: tuple[int, ...] = (512, 512, 3)) -> Any:
    """The TFRecord application's model: average-pool the image down, then a small CNN (a lighter step than
    :func:`deepgalaxy_cnn`, so its input pipeline weighs more)."""
    import keras
    from keras import layers

    return _compile(keras.Sequential([
        keras.Input(shape=tuple(shape), dtype="uint8"),
        layers.Rescaling(1.0 / 255),
        layers.AveragePooling2D(4),
        layers.Conv2D(8, 3, strides=2, activation="relu"),
        layers.Conv2D(16, 3, strides=2, activation="relu"),
        layers.GlobalAveragePooling2D(),
        layers.Dense(CLASSES, activation="softmax"),
    ], name="record_cnn"))
