import dataclasses

import pytest
import torch

from sandgym.train import step as step_mod
from sandgym.train.config import AlgorithmConfig
from sandgym.train.step import Sample, learner_update


@pytest.fixture()
def policy(tiny_model_dir):
    from sandgym.agents.hf import HFPolicy, LoraSpec

    return HFPolicy(str(tiny_model_dir), lora=LoraSpec(r=4, alpha=8, dropout=0.0))


def _samples():
    ids = tuple(range(10, 30))
    mask = tuple([0] * 8 + [1] * 12)
    return [
        Sample(ids, mask, tuple([0.0] * 20), tuple(1.0 * m for m in mask)),
        Sample(ids[::-1], mask, tuple([0.0] * 20), tuple(-1.0 * m for m in mask)),
    ]


def _update(policy, algo, samples=None):
    model = policy.model
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    return learner_update(model, opt, samples or _samples(), algo, pad_id=0, temperature=1.0, micro_batch=1,
                          max_grad_norm=1.0, norm_len=32)


def test_adapter_changes_and_base_does_not(policy):
    named = dict(policy.model.named_parameters())
    before = {k: v.detach().clone() for k, v in named.items()}
    _update(policy, AlgorithmConfig())
    changed = {k for k, v in named.items() if not torch.equal(v.detach(), before[k])}
    assert changed and all("lora_" in k for k in changed)
    assert any("lora_B" in k for k in changed)


def test_beta_zero_skips_the_reference_pass(policy, monkeypatch):
    calls = []
    real = step_mod._ref_logprobs
    monkeypatch.setattr(step_mod, "_ref_logprobs", lambda *a, **k: calls.append(1) or real(*a, **k))
    _update(policy, AlgorithmConfig(beta=0.0))
    assert calls == []
    stats = _update(policy, AlgorithmConfig(beta=0.1))
    assert calls == [1]
    assert stats.kl > 0  # the adapter moved away from the reference in the first update


def test_masked_tokens_get_no_gradient_through_the_model(policy):
    # Changing only tokens under mask 0 after the last sampled token must not change the loss gradient.
    ids = tuple(range(10, 30))
    mask = tuple([0] * 8 + [1] * 6 + [0] * 6)
    a = Sample(ids, mask, tuple([0.0] * 20), tuple(float(m) for m in mask))
    b = Sample(ids[:14] + tuple(range(40, 46)), mask, tuple([0.0] * 20), tuple(float(m) for m in mask))
    grads = []
    for s in (a, b):
        policy.model.zero_grad()
        batch = step_mod.collate([s], pad_id=0)
        lp = step_mod.forward_logprobs(policy.model, batch, 1.0)
        (-(lp * batch.mask * batch.advantages).sum()).backward()
        grads.append([p.grad.clone() for p in policy.model.parameters() if p.requires_grad and p.grad is not None])
    assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(*grads, strict=True))


def test_multiple_epochs_clip(policy):
    stats = _update(policy, AlgorithmConfig(epochs=3, clip_low=0.01, clip_high=0.01))
    assert stats.clip_frac > 0


def _group(shared: int, first: int):
    """Rows with the same first ``shared`` tokens, sampling from position ``first`` on, of different lengths."""
    g = torch.Generator().manual_seed(0)
    rows = []
    for i, extra in enumerate((0, 5, 9, 3)):
        head = tuple(range(10, 10 + shared))
        rest = tuple(int(x) for x in torch.randint(10, 200, (first - shared + 12 + extra,), generator=g))
        ids = head + rest
        mask = tuple([0] * first + [1] * (len(ids) - first))
        adv = tuple(float((-1) ** i) * m for m in mask)
        rows.append(Sample(ids, mask, tuple(-0.5 * m for m in mask), adv))
    return rows


@pytest.mark.parametrize(("shared", "first", "checkpointing"),
                         [(24, 30, False), (24, 24, False), (20, 40, False), (24, 30, True), (24, 24, True)])
def test_shared_prefix_runs_once_and_matches_the_full_forward(policy, shared, first, checkpointing):
    """The same log-probs and gradients with the prefix run once, with and without activation checkpointing (whose
    backward replays each layer: the prefix cache must give the replay what the first pass saw)."""
    from sandgym.train.head import hidden_states_out
    from sandgym.train.shared_prefix import set_activation_checkpointing
    from sandgym.train.step import collate, forward_logprobs

    model = policy.model.train()  # as in training (checkpointing acts in training mode only); LoRA dropout is 0
    set_activation_checkpointing(model, checkpointing)
    with torch.no_grad():  # a non-zero adapter, so gradients reach lora_A too
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05, generator=torch.Generator().manual_seed(len(n)))
    batch = collate(_group(shared, first), pad_id=0)
    assert batch.shared_prefix == shared
    with hidden_states_out(model):  # the output head's one-time probe, before the forward passes are counted
        pass
    prefill_rows = []
    hook = model.get_base_model().register_forward_pre_hook(
        lambda _m, _a, kw: prefill_rows.append(tuple(kw["input_ids"].shape)), with_kwargs=True)
    attn_calls = []  # inside the checkpointed layer: a replay calls it again
    attn_hook = model.get_base_model().model.layers[0].self_attn.register_forward_pre_hook(
        lambda _m, a: attn_calls.append(1))
    results = []
    for b in (batch, dataclasses.replace(batch, shared_prefix=0)):
        model.zero_grad()
        lp = forward_logprobs(model, b, temperature=0.9)
        (lp * b.mask * b.advantages).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        results.append((lp.detach(), grads))
    hook.remove()
    attn_hook.remove()
    set_activation_checkpointing(model, False)
    assert len(attn_calls) == (6 if checkpointing else 3)  # prefix + rest + full, each replayed once
    n = batch.input_ids.shape[1]
    assert prefill_rows == [(1, shared), (4, n - shared), (4, n)]  # shared: the prefix once, then the rest
    (lp_s, g_s), (lp_f, g_f) = results
    torch.testing.assert_close(lp_s * batch.mask, lp_f * batch.mask, atol=1e-5, rtol=1e-4)
    assert any(g.abs().sum() > 0 for g in g_f.values())
    for name in g_f:  # the same gradient up to float summation order
        assert (g_s[name] - g_f[name]).norm() <= 1e-4 * g_f[name].norm() + 1e-8, name


def test_groups_share_a_micro_batch_and_their_prompt():
    from sandgym.train.step import micro_batches, shared_prefix

    a, b = _group(24, 30), [dataclasses.replace(s, token_ids=(7,) + s.token_ids[1:]) for s in _group(24, 30)]
    mbs = list(micro_batches([a[0], b[0], a[1], b[1], a[2], b[2], a[3], b[3]], 4))
    assert [shared_prefix(mb) for mb in mbs] == [24, 24]
    assert {frozenset(map(id, mb)) for mb in mbs} == {frozenset(map(id, a)), frozenset(map(id, b))}


FRAGMENTED_FREE = """
import sys, torch
from sandgym.train.shared_prefix import return_freed_memory
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
if sys.argv[1] == "fix":
    assert return_freed_memory()
x = torch.ones(2 << 20)
del x  # an 8 MiB block freed: glibc's adaptive threshold now keeps such blocks in the heap
before, big, small = rss(), [], []
for _ in range(100):  # 4 MiB blocks, each followed by a small block that stays alive (what layers leave behind)
    big.append(torch.ones(1 << 20))
    small.append(torch.ones(4096))
del big
print(rss() - before)
"""


def test_freed_activations_go_back_to_the_system():
    """With checkpointing on, layer-sized blocks freed by the learner are returned to the system at once; with
    glibc's defaults they stay in a heap that small live blocks keep from being trimmed."""
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's mallopt only")
    kept = {}
    procs = {mode: subprocess.Popen([sys.executable, "-c", FRAGMENTED_FREE, mode], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
             for mode in ("default", "fix")}  # side by side: each process measures its own heap
    for mode, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr[-2000:]
        kept[mode] = float(stdout.split()[-1])
    assert kept["default"] > 300 and kept["fix"] < 50, kept


SCOPED_FREE = """
import torch
from sandgym.train.shared_prefix import freed_memory_returned
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
def kept():  # as FRAGMENTED_FREE: 4 MiB blocks freed between small live ones
    before, big, small = rss(), [], []
    for _ in range(100):
        big.append(torch.ones(1 << 20))
        small.append(torch.ones(4096))
    del big
    return rss() - before, small
x = torch.ones(2 << 20)
del x
with freed_memory_returned() as applied:
    assert applied
    inside, a = kept()
after, b = kept()
print(inside, after)
"""


def test_freed_memory_is_returned_only_inside_the_learner_scope():
    """The 1 MiB thresholds hold inside ``freed_memory_returned`` only: after it (when the sampler runs), freed
    blocks stay in glibc's heap for reuse, as with its defaults (mmap for every block made 8K decoding 1.76x
    slower)."""
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's mallopt only")
    out = subprocess.run([sys.executable, "-c", SCOPED_FREE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    inside, after = map(float, out.stdout.split()[-2:])
    assert inside < 50 and after > 300, (inside, after)


@pytest.mark.parametrize("checkpointing", [False, True])
@pytest.mark.parametrize("phase", ["rl", "sft"])
def test_learners_return_memory_only_under_checkpointing(policy, monkeypatch, checkpointing, phase):
    import contextlib

    from sandgym.train import sft as sft_mod
    from sandgym.train.config import load_config
    from sandgym.train.shared_prefix import checkpointing_on, set_activation_checkpointing

    scopes = []

    @contextlib.contextmanager
    def record(on=True):
        scopes.append(on)
        yield on

    monkeypatch.setattr(step_mod if phase == "rl" else sft_mod, "freed_memory_returned", record)
    set_activation_checkpointing(policy.model, checkpointing)
    assert checkpointing_on(policy.model) is checkpointing
    policy.model.train()
    if phase == "rl":
        _update(policy, AlgorithmConfig())
    else:
        sft_mod.train_on_samples(policy.model, _samples(), load_config(None, ["sft.epochs=1"]), pad_id=0)
    set_activation_checkpointing(policy.model, False)
    assert scopes == [checkpointing]
    assert checkpointing_on(policy.model) is False


def test_off_policy_warning_names_int8_and_its_fix_only_when_samples_are_far_off() -> None:
    from sandgym.train.metrics import off_policy_warning

    assert off_policy_warning({"losses/tis_mean": 1.0}, "int8") is None
    assert off_policy_warning({"losses/tis_mean": 0.93}, "float") is None
    assert off_policy_warning({"losses/trained_sequences": 0.0}, "int8") is None  # nothing trained: nothing to say
    w = off_policy_warning({"losses/tis_mean": 0.81}, "int8")
    assert w is not None and "0.81" in w and "generation_weights='float'" in w
    w = off_policy_warning({"losses/tis_mean": 0.5}, "float")
    assert w is not None and "model.inference" in w and "int8" not in w
