"""Vendor facts of the speed model live in the GPU catalog files with their sources (issue 18:
the measured achievable matmul fraction and the GPU's host link), and the model reads them."""

from __future__ import annotations

from planner.catalog.load import load_catalog
from planner.models import efficiency as eff
from planner.models.network import host_link_gbps


def test_every_catalog_gpu_states_its_host_link_with_a_source():
    for gpu in load_catalog().gpus.values():
        assert gpu.host_link is not None, gpu.id
        assert gpu.host_link_source, gpu.id


def test_measured_matmul_fractions_come_from_the_gpu_files():
    cat = load_catalog()
    h100, h200 = cat.gpu("h100-sxm"), cat.gpu("h200-sxm")
    assert abs(eff.matmul_fraction(h100, "bf16") - 794.5 / 989) < 1e-3
    assert abs(eff.matmul_fraction(h100, "fp8") - 1402.6 / 1979) < 1e-3
    # the H200 has no bf16 measurement of its own: its file carries the H100's, said in source
    assert eff.matmul_fraction(h200, "bf16") == eff.matmul_fraction(h100, "bf16")
    assert "H100" in h200.mamf_source
    # a GPU stas00 did not measure takes the square-matmul database's median over its rows,
    # which may pass 1 on a GeForce card (its datasheet peak is quoted at the nominal boost)
    rtx4090 = cat.gpu("rtx-4090")
    assert abs(eff.matmul_fraction(rtx4090, "bf16") - 165.26 / 165.2) < 1e-3
    assert "torch-performance-test-data" in rtx4090.mamf_source
    assert abs(eff.matmul_fraction(cat.gpu("rtx-a6000"), "bf16") - 123.34 / 154.8) < 1e-3
    # stas00's table comes first where both measured (A100 SXM: 271.2, not 264.53)
    assert "stas00" in cat.gpu("a100-80gb-sxm").mamf_source
    # an unmeasured GPU takes the stated default
    assert cat.gpu("a10g").mamf_bf16_fraction is None
    assert eff.matmul_fraction(cat.gpu("a10g"), "bf16") == eff.DEFAULT_MAMF_BF16


def test_host_link_follows_the_gpu_generation_and_a_grace_c2c_link():
    cat = load_catalog()
    v100, a100, h100 = cat.gpu("v100-32gb"), cat.gpu("a100-80gb-sxm"), cat.gpu("h100-sxm")
    assert host_link_gbps(v100, None) < host_link_gbps(a100, None) < host_link_gbps(h100, None)
    # GB200's NVLink-C2C to Grace is far faster than any PCIe x16 link
    assert host_link_gbps(cat.gpu("gb200"), None) > 3 * host_link_gbps(h100, None)


def test_every_catalog_gpu_states_its_architecture_and_attention_reads_it():
    from planner.models import attention as att

    cat = load_catalog()
    assert all(gpu.architecture for gpu in cat.gpus.values())
    assert cat.gpu("v100-32gb").architecture in att.PRE_AMPERE
    assert cat.gpu("h200-sxm").architecture == "hopper"
    assert att.BENCHMARK_ROW.get(cat.gpu("b200").architecture) == "h100-sxm"
