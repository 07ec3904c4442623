"""A test that writes a file beside itself (not in tmp_path)."""

from pathlib import Path

from tinynet.train import make_data


def test_writes_a_sample_beside_itself():
    x, _ = make_data(4)
    out = Path(__file__).parent / "sample.txt"
    out.write_text(str(x.shape))
    assert out.read_text() == "torch.Size([4, 4])"
