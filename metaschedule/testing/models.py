"""Whole models defined in code (PyTorch modules, random weights, no downloads), shared
by the model tests and ``benchmarks/models.py``.

Each builder takes the ``torch`` module (imported by the caller: torch is an optional
extra) and size arguments whose defaults are the published full-size architecture, and
returns ``(module, input_shape)``: the module in eval mode with seeded random weights and
non-trivial batch-norm statistics, and the shape of its one float32 input. The tests
pass reduced widths, depths and images to keep compiles short.

- :func:`resnet18`: basic-block ResNet (two 3x3 convolutions, projection shortcuts);
  not in :data:`MODELS` (the int8 tests and ``benchmarks/int8.py`` quantize it).
- :func:`resnet50`: bottleneck ResNet (1x1/3x3/1x1, projection shortcuts).
- :func:`mobilenet_v3`: MobileNet-V3 Large (hard-swish, squeeze-excite with a hard
  sigmoid gate, 5x5 depthwise convolutions).
- :func:`efficientnet_b0`: EfficientNet-B0 (MBConv blocks, SiLU, squeeze-excite).
- :func:`vit`: a ViT-B/16-style encoder (patch-embedding convolution, class token,
  positional embedding, pre-norm blocks with ``nn.MultiheadAttention`` and GELU).
- :func:`gpt_block`: a GPT-2-style decoder block (causal
  ``scaled_dot_product_attention``, layer norm, tanh-GELU MLP).
- :func:`unet`: a U-Net-style encoder-decoder (transposed convolutions, nearest and
  bilinear upsampling, skip concatenation).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Shape = tuple[int, ...]


def _divisible(v: float, divisor: int = 8) -> int:
    """MobileNet's channel rounding: the nearest multiple of ``divisor``, never below
    90% of ``v``."""
    out = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * v else out


def finish(torch: Any, module: Any, seed: int = 0) -> Any:
    """``module`` in eval mode; its batch norms get seeded non-trivial running statistics
    and affine parameters (a fresh one is the identity). The builders seed torch before
    they create ``module``, so its weights are the same in every run."""
    torch.manual_seed(seed)
    for m in module.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    return module.eval()


def _conv_bn(torch: Any, cin: int, cout: int, k: int = 3, s: int = 1, groups: int = 1,
             act: Any = None) -> Any:  # fmt: skip
    nn = torch.nn
    mods = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*mods, *([act] if act is not None else []))


def _resnet(torch: Any, block: Any, expansion: int, width: int, blocks: Shape, classes: int) -> Any:
    """A ResNet: the 7x7 stem and max pool, ``blocks[i]`` of ``block(cin, width * 2**i,
    stride)`` per stage (the first of a later stage strides by 2; each gives ``expansion``
    times its width), global average pool and a linear classifier."""
    nn = torch.nn

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, width, 7, 2, 3, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(),
                nn.MaxPool2d(3, 2, 1),
            )
            layers, cin = [], width
            for i, n in enumerate(blocks):
                for j in range(n):
                    layers.append(block(cin, width * 2**i, 2 if i and not j else 1))
                    cin = width * 2**i * expansion
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            x = nn.functional.adaptive_avg_pool2d(self.layers(self.stem(x)), 1)
            return self.fc(torch.flatten(x, 1))

    return ResNet()


# ----------------------------------------------------------------------------- ResNet-18
def resnet18(torch: Any, *, width: int = 64, blocks: Shape = (2, 2, 2, 2), image: int = 224,
             classes: int = 1000) -> tuple[Any, Shape]:  # fmt: skip
    """ResNet-18 (``width`` channels after the stem, ``blocks`` basic blocks per stage)."""
    torch.manual_seed(0)
    nn = torch.nn

    class Basic(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(
                _conv_bn(torch, cin, cout, 3, stride, act=nn.ReLU()),
                _conv_bn(torch, cout, cout, 3),
            )
            self.down = None
            if stride != 1 or cin != cout:
                self.down = _conv_bn(torch, cin, cout, 1, stride)

        def forward(self, x):
            short = x if self.down is None else self.down(x)
            return torch.relu(self.body(x) + short)

    return finish(torch, _resnet(torch, Basic, 1, width, blocks, classes)), (1, 3, image, image)


# ----------------------------------------------------------------------------- ResNet-50
def resnet50(torch: Any, *, width: int = 64, blocks: Shape = (3, 4, 6, 3), image: int = 224,
             classes: int = 1000) -> tuple[Any, Shape]:  # fmt: skip
    """ResNet-50 (``width`` channels after the stem, ``blocks`` bottlenecks per stage)."""
    torch.manual_seed(0)
    nn = torch.nn

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, mid: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(
                _conv_bn(torch, cin, mid, 1, act=nn.ReLU()),
                _conv_bn(torch, mid, mid, 3, stride, act=nn.ReLU()),
                _conv_bn(torch, mid, mid * 4, 1),
            )
            self.down = None
            if stride != 1 or cin != mid * 4:
                self.down = _conv_bn(torch, cin, mid * 4, 1, stride)

        def forward(self, x):
            short = x if self.down is None else self.down(x)
            return torch.relu(self.body(x) + short)

    net = _resnet(torch, Bottleneck, 4, width, blocks, classes)
    return finish(torch, net), (1, 3, image, image)


# ----------------------------------------------------------------------------- mobile nets
def _squeeze_excite(torch: Any, ch: int, squeezed: int, act: Any, gate: Any) -> Any:
    nn = torch.nn

    class SqueezeExcite(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Conv2d(ch, squeezed, 1)
            self.fc2 = nn.Conv2d(squeezed, ch, 1)
            self.act, self.gate = act, gate

        def forward(self, x):
            s = nn.functional.adaptive_avg_pool2d(x, 1)
            return x * self.gate(self.fc2(self.act(self.fc1(s))))

    return SqueezeExcite()


#: MobileNet-V3 Large: kernel, expanded, out, squeeze-excite, hard-swish, stride
MOBILENET_V3_LARGE = (
    (3, 16, 16, False, False, 1),
    (3, 64, 24, False, False, 2),
    (3, 72, 24, False, False, 1),
    (5, 72, 40, True, False, 2),
    (5, 120, 40, True, False, 1),
    (5, 120, 40, True, False, 1),
    (3, 240, 80, False, True, 2),
    (3, 200, 80, False, True, 1),
    (3, 184, 80, False, True, 1),
    (3, 184, 80, False, True, 1),
    (3, 480, 112, True, True, 1),
    (3, 672, 112, True, True, 1),
    (5, 672, 160, True, True, 2),
    (5, 960, 160, True, True, 1),
    (5, 960, 160, True, True, 1),
)


def mobilenet_v3(torch: Any, *, width: float = 1.0, depth: int = 15, image: int = 224,
                 classes: int = 1000) -> tuple[Any, Shape]:  # fmt: skip
    """MobileNet-V3 Large, channels scaled by ``width``, its first ``depth`` blocks."""
    torch.manual_seed(0)
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin: int, k: int, exp: int, cout: int, se: bool, hs: bool,
                     stride: int) -> None:  # fmt: skip
            super().__init__()
            act = nn.Hardswish if hs else nn.ReLU
            mods = [] if exp == cin else [_conv_bn(torch, cin, exp, 1, act=act())]
            mods.append(_conv_bn(torch, exp, exp, k, stride, groups=exp, act=act()))
            if se:
                sq = _divisible(exp // 4)
                mods.append(_squeeze_excite(torch, exp, sq, nn.ReLU(), nn.Hardsigmoid()))
            mods.append(_conv_bn(torch, exp, cout, 1))
            self.body = nn.Sequential(*mods)
            self.res = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.res else self.body(x)

    class MobileNetV3(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            cin = _divisible(16 * width)
            mods = [_conv_bn(torch, 3, cin, 3, 2, act=nn.Hardswish())]
            for k, exp, cout, se, hs, s in MOBILENET_V3_LARGE[:depth]:
                exp, cout = _divisible(exp * width), _divisible(cout * width)
                mods.append(Block(cin, k, exp, cout, se, hs, s))
                cin = cout
            last = 6 * cin
            mods.append(_conv_bn(torch, cin, last, 1, act=nn.Hardswish()))
            self.features = nn.Sequential(*mods)
            head = _divisible(1280 * width) if width > 1 else 1280
            self.classifier = nn.Sequential(
                nn.Linear(last, head), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(head, classes)
            )

        def forward(self, x):
            x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
            return self.classifier(torch.flatten(x, 1))

    return finish(torch, MobileNetV3()), (1, 3, image, image)


#: EfficientNet-B0 stages: expansion, kernel, stride, out channels, repeats
EFFICIENTNET_B0 = (
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
)


def efficientnet_b0(torch: Any, *, width: float = 1.0, depth: int = 7, image: int = 224,
                    classes: int = 1000) -> tuple[Any, Shape]:  # fmt: skip
    """EfficientNet-B0, channels scaled by ``width``, its first ``depth`` stages."""
    torch.manual_seed(0)
    nn = torch.nn

    class MBConv(nn.Module):
        def __init__(self, cin: int, expand: int, k: int, stride: int, cout: int) -> None:
            super().__init__()
            exp = cin * expand
            mods = [] if expand == 1 else [_conv_bn(torch, cin, exp, 1, act=nn.SiLU())]
            mods.append(_conv_bn(torch, exp, exp, k, stride, groups=exp, act=nn.SiLU()))
            mods.append(_squeeze_excite(torch, exp, max(1, cin // 4), nn.SiLU(), nn.Sigmoid()))
            mods.append(_conv_bn(torch, exp, cout, 1))
            self.body = nn.Sequential(*mods)
            self.res = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.res else self.body(x)

    class EfficientNetB0(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            cin = _divisible(32 * width)
            mods = [_conv_bn(torch, 3, cin, 3, 2, act=nn.SiLU())]
            for expand, k, stride, cout, n in EFFICIENTNET_B0[:depth]:
                cout = _divisible(cout * width)
                for i in range(n):
                    mods.append(MBConv(cin, expand, k, stride if i == 0 else 1, cout))
                    cin = cout
            last = _divisible(1280 * width)
            mods.append(_conv_bn(torch, cin, last, 1, act=nn.SiLU()))
            self.features = nn.Sequential(*mods)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, classes))

        def forward(self, x):
            x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
            return self.classifier(torch.flatten(x, 1))

    return finish(torch, EfficientNetB0()), (1, 3, image, image)


# ----------------------------------------------------------------------------- transformers
def vit(torch: Any, *, image: int = 224, patch: int = 16, dim: int = 768, depth: int = 12,
        heads: int = 12, mlp: int = 3072, classes: int = 1000) -> tuple[Any, Shape]:  # fmt: skip
    """A ViT-B/16-style encoder: patches embedded by a strided convolution, a learned
    class token concatenated in front, a positional embedding added, pre-norm blocks of
    ``nn.MultiheadAttention`` and a GELU MLP, the class token's final norm classified."""
    torch.manual_seed(0)
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

        def forward(self, x):
            y = self.ln1(x)
            x = x + self.attn(y, y, y, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class ViT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Conv2d(3, dim, patch, patch)
            self.cls = nn.Parameter(0.02 * torch.randn(1, 1, dim))
            self.pos = nn.Parameter(0.02 * torch.randn(1, (image // patch) ** 2 + 1, dim))
            self.blocks = nn.Sequential(*(Block() for _ in range(depth)))
            self.ln = nn.LayerNorm(dim, eps=1e-6)
            self.head = nn.Linear(dim, classes)

        def forward(self, x):
            x = self.embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            return self.head(self.ln(self.blocks(x))[:, 0])

    return finish(torch, ViT()), (1, 3, image, image)


def gpt_block(torch: Any, *, seq: int = 128, dim: int = 768, heads: int = 12) -> tuple[Any, Shape]:
    """A GPT-2-style decoder block: ``x + attn(ln1(x))`` with causal
    ``scaled_dot_product_attention`` over a fused QKV projection, then
    ``x + mlp(ln2(x))`` with a tanh-approximated GELU."""
    torch.manual_seed(0)
    nn = torch.nn

    class GPTBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.fc = nn.Linear(dim, 4 * dim)
            self.out = nn.Linear(4 * dim, dim)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(dim, dim=2)
            q, k, v = (t.view(b, s, heads, dim // heads).transpose(1, 2) for t in (q, k, v))
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, s, dim))
            h = nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh")
            return x + self.out(h)

    return finish(torch, GPTBlock()), (1, seq, dim)


# ----------------------------------------------------------------------------- U-Net
def unet(torch: Any, *, base: int = 32, image: int = 128, classes: int = 2) -> tuple[Any, Shape]:
    """A U-Net-style encoder-decoder, four levels of double 3x3 convolutions below
    ``base`` channels; the decoder upsamples by a transposed convolution, nearest and
    bilinear ``F.interpolate`` (each then a 1x1 convolution), and a transposed one again,
    concatenating the encoder's output of the same level each time."""
    torch.manual_seed(0)
    nn = torch.nn
    F = nn.functional

    def double(cin: int, cout: int) -> Any:
        return nn.Sequential(
            _conv_bn(torch, cin, cout, act=nn.ReLU()), _conv_bn(torch, cout, cout, act=nn.ReLU())
        )

    class UNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            w = [base * 2**i for i in range(5)]
            self.enc = nn.ModuleList([double(3, w[0])] + [double(w[i], w[i + 1]) for i in range(4)])
            self.up = nn.ModuleList(
                [
                    nn.ConvTranspose2d(w[4], w[3], 2, 2),
                    nn.Conv2d(w[3], w[2], 1),
                    nn.Conv2d(w[2], w[1], 1),
                    nn.ConvTranspose2d(w[1], w[0], 2, 2),
                ]
            )
            self.dec = nn.ModuleList([double(2 * w[3 - i], w[3 - i]) for i in range(4)])
            self.head = nn.Conv2d(w[0], classes, 1)

        def upsample(self, i: int, x):
            if i == 1:
                x = F.interpolate(x, scale_factor=2, mode="nearest")
            elif i == 2:
                x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
            return self.up[i](x)

        def forward(self, x):
            skips = []
            for i, enc in enumerate(self.enc):
                x = enc(x if i == 0 else F.max_pool2d(x, 2))
                skips.append(x)
            x = skips.pop()
            for i, dec in enumerate(self.dec):
                x = dec(torch.cat([self.upsample(i, x), skips.pop()], dim=1))
            return self.head(x)

    return finish(torch, UNet()), (1, 3, image, image)


#: name -> builder at full size; ``benchmarks/models.py --models NAME``
MODELS: dict[str, Callable[..., tuple[Any, Shape]]] = {
    "resnet50": resnet50,
    "mobilenet_v3": mobilenet_v3,
    "efficientnet_b0": efficientnet_b0,
    "vit": vit,
    "gpt_block": gpt_block,
    "unet": unet,
}

#: small sizes for the tests (a few seconds of compiling each, on two cores)
SMALL: dict[str, dict[str, Any]] = {
    "resnet50": {"width": 8, "blocks": (1, 1, 1, 1), "image": 32, "classes": 10},
    "mobilenet_v3": {"width": 0.25, "depth": 11, "image": 32, "classes": 10},
    "efficientnet_b0": {"width": 0.25, "depth": 3, "image": 32, "classes": 10},
    "vit": {"image": 32, "patch": 8, "dim": 32, "depth": 1, "heads": 2, "mlp": 64, "classes": 10},
    "gpt_block": {"seq": 8, "dim": 32, "heads": 2},
    "unet": {"base": 4, "image": 32, "classes": 2},
}
