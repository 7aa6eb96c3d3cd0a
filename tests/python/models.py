"""Small models for the Python module's tests (builders in the exporter's FILE.py:FUNCTION form)."""
import torch
import torch.nn as nn


class TinyLSTM(nn.Module):
    """An LSTM and torch.erfinv: torch.erfinv has no rule, --trace auto measures it (the LSTM is expanded:
    Notes [Recurrent layers], [oneDNN LSTM])."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 8, batch_first=True)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y, _ = self.rnn(torch.erfinv(x))
        return self.fc(y[:, -1])


def tiny_lstm():
    return TinyLSTM(), ["batch,5,8"]


class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 16 * 16, 10)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.bn(self.conv(x))), 1))


def tiny_cnn():
    return TinyCNN(), ["batch,3,16,16"]
