import pytest

from ddlio.units import format_size, parse_size


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [(4096, 4096), ("4096", 4096), ("64KiB", 65536), ("4M", 4 << 20), ("1GiB", 1 << 30), ("1.5K", 1536),
     ("2kB", 2000), ("3 MB", 3_000_000), ("0", 0)],
)
def test_parse_size(text, nbytes):
    assert parse_size(text) == nbytes


@pytest.mark.parametrize("bad", ["abc", "4Q", "-1", "1.3B", "", True])
def test_parse_size_rejects_with_the_accepted_forms(bad):
    with pytest.raises(ValueError, match="size|whole number"):
        parse_size(bad)


def test_format_size():
    assert format_size(512) == "512 B"
    assert format_size(1536) == "1.5 KiB"
    assert format_size(3 << 30) == "3.0 GiB"
