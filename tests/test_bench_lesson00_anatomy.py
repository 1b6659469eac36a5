"""lesson00.anatomy: this GPU's parts from torch's numbers, with the derived counts computed by hand."""

from gpulab.bench import lesson00
from gpulab.core import hardware

# torch.cuda.get_device_properties on an H200, as recorded (gpulab/data/reference-h200.json, lesson00.device)
H200_INFO = dict(
    name="NVIDIA H200",
    sms=132,
    regs_per_sm=65536,
    smem_per_sm=233472,
    l2_bytes=62914560,
    memory_bytes=150109880320,
    threads_per_sm=2048,
)


def test_h200_numbers_by_hand():
    text = lesson00.anatomy(H200_INFO)
    lines = text.splitlines()
    assert len(lines) <= 10, text
    assert "132 SMs" in lines[0]
    assert "64 warps of 32" in text and "270,336 threads on the whole GPU" in text  # 2048 / 32; 2048 x 132
    assert "256 KiB per SM, 32 per thread" in text  # 65536 x 4 bytes; 65536 / 2048
    assert "228 KiB per SM" in text and "L2: 60 MiB" in text  # 233472 / 1024; 62914560 / 2^20
    assert "150.1 GB = 139.8 GiB at 4.8 TB/s" in text
    assert "67 TFLOP/s" in text and "989.5 TFLOP/s, 14.8x" in text  # 989.5 / 67 = 14.77


def test_fp16_tensor_rate_where_there_is_no_bf16_and_unknown_gpus():
    t4 = lesson00.anatomy(dict(name="Tesla T4", sms=40, threads_per_sm=1024), hardware.get("T4"))
    assert "fp16 tensor cores: 65 TFLOP/s, 8.0x" in t4  # 65 / 8.1
    assert "32 warps of 32" in t4 and "40,960 threads" in t4
    bare = lesson00.anatomy(dict(name="Mystery GPU", sms=10))
    assert bare == "Mystery GPU: 10 SMs (streaming multiprocessors)"
