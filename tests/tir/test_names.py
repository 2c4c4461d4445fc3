"""unique_name: the one naming rule of the printer, codegen, new blocks and the graph builder."""

from metaschedule.tir.names import unique_name


def test_unique_name_takes_the_first_free_suffix():
    assert unique_name("x", set()) == "x"
    assert unique_name("x", {"x"}) == "x_1"
    assert unique_name("x", {"x", "x_1", "x_3"}) == "x_2"
    assert unique_name("x", {"x": 0, "x_1": 1}) == "x_2"  # any container: a dict's keys
