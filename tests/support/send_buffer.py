"""An in-memory transport that buffers what it is written as a TCP transport does."""

from __future__ import annotations

from twisted.internet.testing import StringTransport


class SendBuffer(StringTransport):
    """What the server reads of a TCP transport: bytes written and not yet sent count as
    unsent (``_tempDataLen``); past ``bufferSize`` the streaming producer is paused, and it is
    resumed once the peer has taken everything (as ``FileDescriptor.doWrite`` does)."""

    def __init__(self) -> None:
        super().__init__()
        self.bufferSize = 0
        self.dataBuffer = b""
        self.offset = 0
        self._tempDataLen = 0
        self.producerPaused = False
        self.peak = 0

    def write(self, data: bytes) -> None:
        super().write(data)
        self._tempDataLen += len(data)
        self.peak = max(self.peak, self._tempDataLen)
        if self.producer is not None and self.streaming and self._tempDataLen > self.bufferSize:
            self.producerPaused = True
            self.producer.pauseProducing()

    def take(self) -> bytes:
        """The peer reads everything sent so far."""
        data = self.value()
        self.clear()
        self._tempDataLen = 0
        if self.producerPaused:
            self.producerPaused = False
            self.producer.resumeProducing()
        return data
