"""Small PyTorch models shared by the graph tests (torch imported by the caller)."""

from __future__ import annotations


def make_cnn(torch):
    nn = torch.nn

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.b1 = nn.BatchNorm2d(8)
            self.c2 = nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.b2 = nn.BatchNorm2d(8)
            self.c3 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.b3 = nn.BatchNorm2d(16)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = torch.relu(self.b1(self.c1(x)))
            x = torch.nn.functional.relu6(self.b2(self.c2(x)))
            x = torch.relu(self.b3(self.c3(x)))
            x = self.pool(x)
            x = torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
            return self.fc(x)

    torch.manual_seed(0)
    m = CNN().eval()
    for bn in (m.b1, m.b2, m.b3):  # non-trivial statistics
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-0.5, 0.5)
    return m, (torch.randn(1, 3, 16, 16),)


def make_mlp(torch):
    nn = torch.nn
    torch.manual_seed(0)
    m = nn.Sequential(
        nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)
    ).eval()
    return m, (torch.randn(4, 32),)


def make_transformer(torch, seq=8, d=32, heads=2):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln1 = nn.LayerNorm(d)
            self.ln2 = nn.LayerNorm(d)
            self.ff1 = nn.Linear(d, 4 * d)
            self.ff2 = nn.Linear(4 * d, d)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).split(d, dim=-1)
            q = q.reshape(b, s, heads, d // heads).transpose(1, 2)
            k = k.reshape(b, s, heads, d // heads).transpose(1, 2)
            v = v.reshape(b, s, heads, d // heads).transpose(1, 2)
            att = torch.softmax(q @ k.transpose(-1, -2) / (d // heads) ** 0.5, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, s, d)
            x = self.ln1(x + self.proj(y))
            return self.ln2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))

    torch.manual_seed(0)
    return Block().eval(), (torch.randn(1, seq, d),)
