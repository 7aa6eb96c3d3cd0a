# ONNX import round trip (only when lib/onnx is built): torch.onnx.export of the seed MLP,
# mnist_cnn, torchvision resnet18, bert_small and torchvision vit_b_16 → memsim import-onnx → same
# peak_live_bytes as the zoo graph.
# /usr/bin/python3 explicitly: the python3 on PATH may be one without torch.
if(TARGET memsim_onnx)
  add_test(NAME onnx.roundtrip
           COMMAND /usr/bin/python3 tests/onnx/roundtrip.py $<TARGET_FILE:memsim> ${CMAKE_BINARY_DIR}/onnx_roundtrip
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(onnx.roundtrip PROPERTIES TIMEOUT 300 LABELS onnx)
endif()
