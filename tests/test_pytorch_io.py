"""PyTorch in and out: torch.export import round trips, optimize_module, the torch.compile backend
``eqsat`` (its outputs, its one-line fallback, its registration), and the user's module unchanged."""
import contextlib
import importlib.metadata
import logging

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")

from eqsat.errors import UnsupportedError  # noqa: E402
from eqsat.pytorch.importer import from_module, to_torch  # noqa: E402
from eqsat.pytorch.optimize import Options, optimize_module  # noqa: E402

QUICK = {"search": "eqsat", "device": "h100"}


class QKV(torch.nn.Module):
    """Three projections of one input: the e-graph merges them into one matmul."""

    def __init__(self, d=16):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(d, d) for _ in range(3))

    def forward(self, x):
        return torch.relu(self.q(x)) + self.k(x) * self.v(x)


class ConvBNReLU(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.act = torch.nn.ReLU(inplace=True)  # in place on a temporary, as torchvision writes it: fine

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class TinyBlock(torch.nn.Module):
    """A pre-norm transformer block written out (attention, GELU MLP, residuals)."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, 2 * d), torch.nn.Linear(2 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))


def _bn_with_stats(m):
    with torch.no_grad():
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 2.0)
        m.bn.weight.uniform_(0.5, 1.5)
    return m


def _cases():
    torch.manual_seed(0)
    return {"qkv": (QKV().eval(), torch.randn(4, 16)),
            "conv_bn_relu": (_bn_with_stats(ConvBNReLU()).eval(), torch.randn(1, 3, 8, 8)),
            "block": (TinyBlock().eval(), torch.randn(1, 5, 16))}


def _snapshot(m):
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def _same_state(m, before):
    after = m.state_dict()
    return before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("name", ["qkv", "conv_bn_relu", "block"])
def test_export_round_trip_equals_module(name):
    m, x = _cases()[name]
    source = from_module(m, (x,))
    assert source.opaque == []  # everything the exporter writes for these maps onto the op table
    assert source.weights  # the real weights, by leaf name
    with torch.no_grad():
        torch.testing.assert_close(to_torch(source.graph, source)(x), m(x), rtol=1e-4, atol=1e-5)


def test_optimize_module_merges_qkv_and_leaves_the_module_alone():
    m, x = _cases()["qkv"]
    before = _snapshot(m)
    optimized = optimize_module(m, (x,), **QUICK)
    with torch.no_grad():
        torch.testing.assert_close(optimized(x), m(x), rtol=1e-4, atol=1e-5)
    assert "-> 28.00 µs" in optimized.summary and optimized.kept is None  # three projections priced as one (36 µs)
    assert _same_state(m, before) and m.training is False


@contextlib.contextmanager
def _eqsat_warnings():
    """The warning lines the backend logs meanwhile (one handler on its logger, whatever the
    logging configuration)."""
    records = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("eqsat.pytorch")
    logger.addHandler(handler)
    lines = []
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        lines.extend(r.getMessage() for r in records)


def test_compile_backend_outputs_equal_eager():
    import eqsat.pytorch.backend  # noqa: F401  registers "eqsat" when no installed entry point does

    for name in ("conv_bn_relu", "block"):
        m, x = _cases()[name]
        before = _snapshot(m)
        torch._dynamo.reset()
        compiled = torch.compile(m, backend="eqsat", options=QUICK)
        with _eqsat_warnings() as lines, torch.no_grad():
            got = compiled(x)
            expected = m(x)
        assert lines == []  # optimized, not fallen back
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
        assert _same_state(m, before)


def _fallback(m, x, options=QUICK, grad=False):
    import eqsat.pytorch.backend  # noqa: F401

    torch._dynamo.reset()
    compiled = torch.compile(m, backend="eqsat", options=options)
    with _eqsat_warnings() as lines, torch.set_grad_enabled(grad):
        got = compiled(x)
    assert len(lines) == 1 and "\n" not in lines[0], lines
    with torch.no_grad():
        torch.testing.assert_close(got, m(x))
    return lines[0]


def test_compile_falls_back_with_one_line_on_an_op_the_exporter_cannot_write():
    # PyTorch's fast path (eval, no grad) calls one fused aten op no ONNX function translates
    m = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).eval()
    before = _snapshot(m)
    line = _fallback(m, torch.randn(1, 5, 16))
    assert "_transformer_encoder_layer_fwd" in line and "unoptimized" in line
    assert _same_state(m, before)


@torch.library.custom_op("eqsat_test::scale_rows", mutates_args=())
def scale_rows(x: torch.Tensor) -> torch.Tensor:
    """A user's kernel: PyTorch's ONNX exporter has no function for it."""
    return x * torch.arange(1, x.shape[0] + 1, dtype=x.dtype).unsqueeze(1)


@scale_rows.register_fake
def _(x):
    return torch.empty_like(x)


class WithKernel(QKV):
    def forward(self, x):
        return self.v(scale_rows(torch.relu(self.q(x)) + self.k(x)))


def test_compile_keeps_an_op_the_exporter_cannot_write_in_pytorch():
    import eqsat.pytorch.backend  # noqa: F401

    torch.manual_seed(0)
    m, x = WithKernel().eval(), torch.randn(4, 16)
    torch._dynamo.reset()
    compiled = torch.compile(m, backend="eqsat", options=QUICK)
    with _eqsat_warnings() as lines, torch.no_grad():
        got = compiled(x)
    assert lines == []  # the kernel runs in PyTorch, the parts around it are optimized
    with torch.no_grad():
        torch.testing.assert_close(got, m(x), rtol=1e-4, atol=1e-5)


def test_compile_falls_back_on_complex_dtypes_bad_options_and_gradients():
    class Magnitude(torch.nn.Module):
        def forward(self, z):
            return (z * 2).abs() + 1

    assert "is torch.complex64, which eqsat cannot compute in" in _fallback(
        Magnitude(), torch.randn(2, 8, dtype=torch.complex64))
    m, x = _cases()["qkv"]
    assert "unknown option 'serach'" in _fallback(m, x, {"serach": "eqsat"})
    assert "unknown search 'nope'" in _fallback(m, x, {"search": "nope"})
    assert "gradients" in _fallback(m, x, QUICK, grad=True)


def test_unsupported_inputs_are_one_sentence():
    m, _ = _cases()["qkv"]
    with pytest.raises(UnsupportedError, match="complex"):
        from_module(m, (torch.randn(4, 16, dtype=torch.complex64),))
    train = _bn_with_stats(ConvBNReLU()).train()
    before = _snapshot(train)
    with pytest.raises(UnsupportedError, match=r"batch_norm in training mode; .*\.eval\(\)"):
        optimize_module(train, (torch.randn(1, 3, 8, 8),), **QUICK)
    assert _same_state(train, before) and train.training
    class Accumulate(torch.nn.Module):
        def forward(self, x):
            return x.add_(1) * 2

    with pytest.raises(UnsupportedError, match="changes a tensor in place .add_.; .* no weight, buffer or input"):
        from_module(Accumulate(), (torch.randn(2, 3),))
    with pytest.raises(UnsupportedError, match="unknown option"):
        Options.parse({"devcie": "h100"})


def test_backend_is_registered_by_name():
    import eqsat.pytorch.backend  # noqa: F401

    assert "eqsat" in torch._dynamo.list_backends()
    try:
        dist = importlib.metadata.distribution("eqsat-lab")
    except importlib.metadata.PackageNotFoundError:
        return
    eps = [ep for ep in dist.entry_points if ep.group == "torch_dynamo_backends"]
    if eps:  # an install from this pyproject: torch finds the backend without importing eqsat first
        assert [(ep.name, ep.value) for ep in eps] == [("eqsat", "eqsat.pytorch.backend:eqsat_backend")]


@pytest.mark.slow
def test_torchvision_resnet18_imports_whole_and_compiles():
    torchvision = pytest.importorskip("torchvision")
    import eqsat.pytorch.backend  # noqa: F401

    torch.manual_seed(0)
    m, x = torchvision.models.resnet18().eval(), torch.randn(1, 3, 64, 64)
    before = _snapshot(m)
    source = from_module(m, (x,))
    assert source.opaque == [] and source.graph.op_count() == 50
    torch._dynamo.reset()
    compiled = torch.compile(m, backend="eqsat", options=QUICK)
    with _eqsat_warnings() as lines, torch.no_grad():
        got = compiled(x)
    assert lines == []
    with torch.no_grad():
        torch.testing.assert_close(got, m(x), rtol=1e-3, atol=1e-4)
    assert _same_state(m, before)
