"""What each rank of a checkpoint writes: the shard arithmetic of DLIO, held to its numbers, and MLPerf's presets.

A checkpoint kind point names a model (its transformer dimensions and datatypes, :class:`ModelShape`) and a
parallelism (tensor and pipeline degrees and the ZeRO stage, :class:`Parallelism`); from those and the number of
ranks follow the pieces every rank writes (:func:`rank_pieces`), in bytes. Standard library only: validation imports
this module.

The arithmetic is DLIO's, restated here (no code of DLIO's is copied): argonne-lcf/dlio_benchmark,
``dlio_benchmark/checkpointing/base_checkpointing.py`` at tag ``v2.0.1`` (b56c741), identical for everything
written to the branch ``mlperf_storage_v2.0`` (392621b) that MLPerf Storage v2.0 installs (mlcommons/storage
``pyproject.toml``: ``dlio-benchmark @ git+...@mlperf_storage_v2.0``). DLIO 2.0.0 on PyPI (Aug 2024) predates it:
its checkpoints are sized by hand (``checkpoint.model_size``, ``optimization_groups``, ``layer_parameters``) and
know neither model dimensions nor ZeRO. Each function below names the DLIO method whose formula it restates.

Sizes are the tensors' bytes (elements x bytes per element), as DLIO counts them when it reports "Model size" and
"Optimizer state size"; the files ``torch.save`` makes of them are a few hundred bytes larger (pickle framing).
Only DLIO's ``model.type: transformer`` path is restated (every MLPerf preset is one); the hand-sized
``model_size``/``optimization_groups``/``layer_parameters`` path of older configs is not.
"""

from __future__ import annotations

from dataclasses import dataclass

#: bytes per element of each datatype name DLIO accepts (base_checkpointing.py::get_datatype_size)
DATATYPE_BYTES: dict[str, int] = {"int8": 1, "uint8": 1, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}

#: ZeRO stages DLIO distinguishes (base_checkpointing.py: 0, 1, 2 and 3 each take a different branch)
ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer's dimensions, as DLIO's ``model:`` section gives them (config.py::LoadConfig)."""

    num_layers: int  # transformer layers (DLIO: model.num_layers)
    hidden_size: int  # model width, elements (model.transformer.hidden_size)
    ffn_hidden_size: int  # MLP inner width, elements (model.transformer.ffn_hidden_size)
    vocab_size: int  # tokens in the embedding and lm_head (model.transformer.vocab_size)
    num_attention_heads: int  # query heads (model.transformer.num_attention_heads)
    num_kv_heads: int  # key/value heads, grouped-query attention (model.transformer.num_kv_heads)
    model_datatype: str = "fp16"  # datatype of the model's parameters (model.model_datatype), a DATATYPE_BYTES key
    optimizer_datatype: str = "fp32"  # datatype of the optimizer's states (model.optimizer_datatype)


@dataclass(frozen=True)
class Parallelism:
    """How the model is split over ranks (DLIO's ``model.parallelism``).

    The data-parallel degree is not a field: DLIO derives it from the communicator's size,
    ``data_parallelism = comm_size // (pipeline * tensor)`` when ``model.parallelism.data`` is unset
    (base_checkpointing.py::BaseCheckpointing.__init__, ``if self.args.data_parallelism < 0``); MLPerf sets it only
    in its "subset" mode, which ddlio does not restate.
    """

    tensor: int = 1  # tensor-parallel degree (model.parallelism.tensor)
    pipeline: int = 1  # pipeline-parallel degree (model.parallelism.pipeline)
    zero_stage: int = 0  # DeepSpeed ZeRO stage, 0 to 3 (model.parallelism.zero_stage)


def datatype_bytes(name: str) -> int:
    """Bytes per element of DLIO's datatype ``name`` (base_checkpointing.py::get_datatype_size)."""
    try:
        return DATATYPE_BYTES[name]
    except KeyError:
        raise ValueError(f"unknown datatype {name!r}; choose one of {', '.join(DATATYPE_BYTES)}") from None


def parallelism_problem(par: Parallelism, ranks: int, model: ModelShape | None = None) -> str | None:
    """One sentence saying why ``ranks`` ranks cannot run ``par`` (with ``model``, if given), or None when they can.

    The checks are DLIO's (utils/config.py::ConfigArguments.validate at mlperf_storage_v2.0): the number of
    processes is a multiple of pipeline x tensor; ZeRO 3 does not combine with pipeline parallelism; a model has at
    least as many layers as pipeline stages.
    """
    if par.tensor < 1 or par.pipeline < 1:
        return (f"checkpoint.tensor={par.tensor} and checkpoint.pipeline={par.pipeline} must both be at least 1; "
                "set checkpoint.tensor=1 checkpoint.pipeline=1 for no model parallelism.")
    if par.zero_stage not in ZERO_STAGES:
        return f"checkpoint.zero_stage={par.zero_stage} is not a ZeRO stage; choose one of 0, 1, 2, 3."
    if par.zero_stage == 3 and par.pipeline > 1:
        return (f"ZeRO stage 3 does not combine with pipeline parallelism (checkpoint.pipeline={par.pipeline}), "
                "as in DLIO; set checkpoint.pipeline=1 or checkpoint.zero_stage=1.")
    if model is not None and model.num_layers < par.pipeline:
        return (f"{model.num_layers} layers cannot fill {par.pipeline} pipeline stages; "
                f"set checkpoint.pipeline to at most {model.num_layers}.")
    group = par.tensor * par.pipeline
    if ranks < 1 or ranks % group:
        few = ", ".join(str(group * k) for k in (1, 2, 3))
        return (f"{ranks} ranks cannot hold tensor={par.tensor} x pipeline={par.pipeline} model parallelism: "
                f"the rank count must be a positive multiple of {group} ({few}, ...); "
                "run that many ranks or change the parallelism, as with checkpoint.tensor=1 checkpoint.pipeline=1.")
    return None


def num_parameters(model: ModelShape) -> int:
    """Parameters of the whole model, elements (base_checkpointing.py::BaseCheckpointing.get_num_parameters).

    Embedding and lm_head (vocab x hidden each), a final norm (hidden), and per layer: two norms (hidden each),
    Q/K/V (hidden x (hidden + 2 x kv_dim), kv_dim = (hidden // heads) x kv_heads), the attention output
    (hidden x hidden) and a gated MLP (3 x hidden x ffn: its up projection counts twice for the gate).
    """
    if model.num_layers <= 0:
        return 0
    h = model.hidden_size
    kv_dim = (h // model.num_attention_heads) * model.num_kv_heads
    per_layer = h + h * (h + 2 * kv_dim) + h * h + h + 2 * model.ffn_hidden_size * h + model.ffn_hidden_size * h
    embedding = model.vocab_size * h
    return embedding + per_layer * model.num_layers + h + embedding


def _layer_parameters(model: ModelShape, par: Parallelism, data: int, layer: int) -> list[int]:
    """Elements of each tensor of ``layer`` one rank holds (base_checkpointing.py::get_layer_parameters).

    Layers are numbered 0 (embedding), 1..num_layers (transformer layers), num_layers + 1 (lm_head) and
    num_layers + 2 (final norm). Tensor parallelism splits every matrix, not the norms; ZeRO 3 splits everything
    over the ``data`` data-parallel ranks. Each division rounds down, in DLIO's order.
    """
    h, tp = model.hidden_size, par.tensor
    shard = data if par.zero_stage >= 3 else 1
    if layer in (0, model.num_layers + 1):
        return [h * model.vocab_size // tp // shard]
    if layer == model.num_layers + 2:
        return [h // shard]
    kv_dim = (h // model.num_attention_heads) * model.num_kv_heads
    return [
        h // shard,  # input norm
        h * (h + 2 * kv_dim) // tp // shard,  # Q, K, V
        h * h // tp // shard,  # attention output
        h // shard,  # post-attention norm
        h * 2 * model.ffn_hidden_size // tp // shard,  # MLP up and gate
        h * model.ffn_hidden_size // tp // shard,  # MLP down
    ]


def _layer_range(model: ModelShape, par: Parallelism, stage: int) -> range:
    """The layers pipeline stage ``stage`` holds (base_checkpointing.py::get_layer_index).

    Transformer layers are dealt out in contiguous blocks, the first ``num_layers % pipeline`` stages one more;
    the first stage also holds layer 0 and the last stage layers num_layers + 1 and + 2.
    """
    each, extra = divmod(model.num_layers, par.pipeline)
    if stage < extra:
        start = stage * (each + 1) + 1
        end = start + each
    else:
        start = extra * (each + 1) + (stage - extra) * each + 1
        end = start + each - 1
    if stage == par.pipeline - 1:
        end = model.num_layers + 2
    if stage == 0:
        start = 0
    return range(start, end + 1)


def _optimizer_groups(model: ModelShape, par: Parallelism, data: int) -> list[int]:
    """Elements of each optimizer tensor one rank holds (base_checkpointing.py::get_optimization_groups).

    Three groups of (parameters / shards, 5 x hidden), the first standing for the fp32 master copy, momentum and
    variance; the parameters are split over the model-parallel ranks and, with ZeRO >= 1, over the data-parallel
    ones too.
    """
    if model.num_layers <= 0:
        return []
    shards = par.tensor * par.pipeline * (data if par.zero_stage > 0 else 1)
    n = num_parameters(model) // shards
    if n <= 0:
        return []
    return [n, 5 * model.hidden_size] * 3


def rank_pieces(model: ModelShape, par: Parallelism, ranks: int) -> list[list[tuple[str, int]]]:
    """For each rank 0..ranks-1, the (name, bytes) of every file it writes, in the order DLIO writes them.

    Restates base_checkpointing.py::BaseCheckpointing.__init__ (which ranks hold model and optimizer states) and
    ::save_checkpoint (which of them write what). A rank's coordinates are tensor = rank % tensor, pipeline stage =
    (rank // tensor) % pipeline, model-parallel rank = rank % (tensor x pipeline), data-parallel rank =
    rank // (tensor x pipeline). Then:

    - ZeRO 0: only the first tensor x pipeline ranks write; the others hold nothing.
    - ZeRO 1 and 2: the model states are written by data-parallel rank 0 only, one file per layer when pipelined,
      else one file; every rank writes its optimizer shard.
    - ZeRO 0 and 3: each writing rank writes its model states (its layers, sharded over data-parallel ranks
      under ZeRO 3) as one file, then its optimizer states.

    Names are DLIO's file names without the step folder and extension, e.g.
    ``zero_pp_rank_0_mp_rank_3_optim_states``. Bytes are the tensors' (elements x datatype bytes).

    Raises:
        ValueError: if the parallelism cannot run on ``ranks`` ranks (:func:`parallelism_problem`'s sentence).
    """
    problem = parallelism_problem(par, ranks, model)
    if problem:
        raise ValueError(problem)
    model_bytes, optim_bytes = datatype_bytes(model.model_datatype), datatype_bytes(model.optimizer_datatype)
    mp = par.tensor * par.pipeline
    data = ranks // mp
    optimizer = sum(_optimizer_groups(model, par, data)) * optim_bytes
    layer_bytes: dict[tuple[int, int], int] = {}  # (stage, layer) -> bytes, the same for every tensor rank
    out: list[list[tuple[str, int]]] = []
    for rank in range(ranks):
        stage, mp_rank, dp_rank = (rank // par.tensor) % par.pipeline, rank % mp, rank // mp
        pieces: list[tuple[str, int]] = []
        out.append(pieces)
        if par.zero_stage == 0 and rank >= mp:
            continue  # __init__: rank_to_checkpoint = 0, so nothing is built or saved on this rank
        layers = []
        for layer in _layer_range(model, par, stage):
            key = (stage, layer)
            if key not in layer_bytes:
                layer_bytes[key] = sum(_layer_parameters(model, par, data, layer)) * model_bytes
            layers.append((layer, layer_bytes[key]))
        if model.num_layers > 0:
            if par.zero_stage in (1, 2):
                if dp_rank == 0:
                    if par.pipeline > 1:
                        pieces.extend((f"layer_{i}-model_{mp_rank}_model_states", b) for i, b in layers)
                    else:
                        pieces.append((f"model_{mp_rank}_model_states", sum(b for _, b in layers)))
            else:
                pieces.append((f"zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_model_states", sum(b for _, b in layers)))
        if optimizer:
            pieces.append((f"zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_optim_states", optimizer))
    return out


def rank_bytes(model: ModelShape, par: Parallelism, ranks: int) -> list[int]:
    """Bytes each rank 0..ranks-1 writes: the sum of its :func:`rank_pieces`."""
    return [sum(b for _, b in pieces) for pieces in rank_pieces(model, par, ranks)]


def scaled(sizes: list[int], total: int) -> list[int]:
    """``total`` bytes split in the proportions of ``sizes``: integers summing to ``total`` exactly.

    Each share is within one byte of ``total * size / sum(sizes)``: the floors first, then the bytes left over one
    each to the largest remainders (ties to the lower index), so a size of 0 keeps 0 and the result is
    deterministic. ``checkpoint.size`` uses it to shrink a preset to what a small machine can write.

    Raises:
        ValueError: on a negative size or total, or a positive total with every size 0.
    """
    if total < 0 or any(s < 0 for s in sizes):
        raise ValueError(f"sizes and total must not be negative (total {total}, sizes {sizes})")
    whole = sum(sizes)
    if whole == 0:
        if total:
            raise ValueError(f"cannot split {total} bytes in the proportions of sizes that are all 0")
        return [0] * len(sizes)
    shares = [total * s // whole for s in sizes]
    remainders = [total * s % whole for s in sizes]
    left = total - sum(shares)
    for i in sorted(range(len(sizes)), key=lambda i: (-remainders[i], i))[:left]:
        shares[i] += 1
    return shares


#: MLPerf Storage v2.0's checkpoint presets: (model, parallelism, MLPerf's CLOSED process count). Values from
#: mlcommons/storage (caa90c9) configs/dlio/workload/llama3_*.yaml; process counts from its
#: Submission_guidelines.md §2.2.1 ("8, 64, 512, and 1024") and mlpstorage/config.py::LLM_ALLOWED_VALUES.
PRESETS: dict[str, tuple[ModelShape, Parallelism, int]] = {
    "llama3_8b": (  # configs/dlio/workload/llama3_8b.yaml
        ModelShape(num_layers=32, hidden_size=4096, ffn_hidden_size=14336, vocab_size=128256,
                   num_attention_heads=32, num_kv_heads=8, model_datatype="fp16", optimizer_datatype="fp32"),
        Parallelism(tensor=1, pipeline=1, zero_stage=3),
        8,  # Submission_guidelines.md Table 2: TPxPPxDP 1x1x8
    ),
    "llama3_70b": (  # configs/dlio/workload/llama3_70b.yaml
        ModelShape(num_layers=80, hidden_size=8192, ffn_hidden_size=28672, vocab_size=128256,
                   num_attention_heads=128, num_kv_heads=8, model_datatype="fp16", optimizer_datatype="fp32"),
        Parallelism(tensor=8, pipeline=1, zero_stage=3),
        64,  # Table 2: 8x1x8
    ),
    "llama3_405b": (  # configs/dlio/workload/llama3_405b.yaml
        ModelShape(num_layers=126, hidden_size=16384, ffn_hidden_size=53248, vocab_size=128256,
                   num_attention_heads=128, num_kv_heads=8, model_datatype="fp16", optimizer_datatype="fp32"),
        Parallelism(tensor=8, pipeline=32, zero_stage=1),
        512,  # Table 2: 8x32x2
    ),
    "llama3_1t": (  # configs/dlio/workload/llama3_1t.yaml
        ModelShape(num_layers=128, hidden_size=25872, ffn_hidden_size=98304, vocab_size=128256,
                   num_attention_heads=192, num_kv_heads=32, model_datatype="fp16", optimizer_datatype="fp32"),
        Parallelism(tensor=8, pipeline=64, zero_stage=1),
        1024,  # Table 2: 8x64x2
    ),
}
