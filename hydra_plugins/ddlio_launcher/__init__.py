"""ddlio as a Hydra launcher (``hydra/launcher=ddlio``): Hydra hands it each batch of points; it validates the
whole batch, measures it through :mod:`experiments.run` and returns each point's objective, so any Hydra
sweeper (the grid, Optuna) drives ddlio. Importing this package is cheap: Hydra imports it to discover plugins."""
