"""graphs/generate.sh reproduces the committed zoo files (a cheap subset is regenerated)."""
import json
import os
import re
import subprocess
import tempfile
import unittest

from export_util import GRAPHS, ROOT, check_well_formed
from memsim_export.symbols import numel_at

CHEAP = ["mlp", "mnist_cnn", "resnet18", "bert_small", "multimodal_bert", "gpt2_small", "nanogpt_gpt2_small",
         "cs336_small", "cs336_small_course_loss", "cs336_medium", "llama_1b"]  # LLMs: built on meta, cheap

PARAMS = {  # parameter elements of every zoo graph
    "mlp": 131410, "mnist_cnn": 1111946,
    # alexnet: torchvision's variant (61,100,840, what trace_step.py records) or the paper's
    # single-tower AlexNet (62,378,344) with torchvision's then in alexnet_torchvision
    "alexnet": {61100840, 62378344}, "alexnet_torchvision": 61100840, "vgg11": 132863336, "vgg16": 138357544,
    "resnet18": 11689512, "resnet50": 25557032, "mobilenet_v2": 3504872, "vit_b16": 86567656,
    "bert_base": 108596738, "bert_small": 11006466, "gpt2_small": 124439808, "multimodal_bert": 108700682,
    # language models (genlm): parameters at the default symbol values
    "nanogpt_gpt2_small": 124373760, "nanogpt_gpt2_medium": 354599936, "nanogpt_gpt2_large": 773582080,
    "nanogpt_gpt2_xl": 1556840000, "cs336_small": 128625408, "cs336_medium": 423183360,
    "llama_1b": 1235814400, "llama_8b": 8030261248, "cs336_small_course_loss": 128625408, "llama3_8b": 8030261248,
    "llama3_70b": 70553706496, "mixtral_8x7b": 46702792704,
}
OWN_LOSS = {"cs336_small_course_loss"}  # the model returns its loss (inputs end with its targets)
LLM_BATCH = {"nanogpt_gpt2_small": 8, "nanogpt_gpt2_medium": 8, "nanogpt_gpt2_large": 8, "nanogpt_gpt2_xl": 8,
             "cs336_small": 32, "cs336_medium": 32, "cs336_small_course_loss": 32, "llama_1b": 4, "llama_8b": 1, "llama3_8b": 2,
             "llama3_70b": 1, "mixtral_8x7b": 1}


def zoo_names():
    with open(os.path.join(GRAPHS, "generate.sh")) as f:
        return re.findall(r"^(?:gen|genlm|genlm2|genhf) ([a-z0-9_]+) ", f.read(), re.M)


class Zoo(unittest.TestCase):
    def test_generate_lists_every_graph(self):
        self.assertLessEqual(set(zoo_names()), set(PARAMS))
        self.assertLessEqual(set(PARAMS) - set(zoo_names()), {"alexnet_torchvision"})
        for name in zoo_names():
            self.assertTrue(os.path.exists(os.path.join(GRAPHS, name + ".json")), name)

    def test_committed_graphs(self):
        for name in zoo_names():
            with self.subTest(graph=name):
                with open(os.path.join(GRAPHS, name + ".json")) as f:
                    g = json.load(f)
                check_well_formed(self, g)
                self.assertEqual(g["name"], name)
                self.assertTrue(g.get("provenance"), "a zoo graph must state its provenance")
                self.assertEqual(g["symbols"]["batch"], LLM_BATCH.get(name, 32))
                self.assertEqual(g["inputs"][0]["shape"][0], "batch")
                if name in OWN_LOSS:
                    self.assertEqual(g["loss"], g["ops"][-1]["outputs"][0])
                else:
                    self.assertEqual(g["inputs"][-1]["name"], "target")
                    self.assertEqual(g["ops"][-1]["op"], "cross_entropy")
                n = 0
                for p in g["parameters"]:
                    n += numel_at(p["shape"], g["symbols"])
                exp = PARAMS[name]
                self.assertIn(n, exp if isinstance(exp, set) else {exp})

    def test_regenerate_cheap_subset(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([os.path.join(GRAPHS, "generate.sh"), d] + CHEAP, cwd=ROOT, capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            for name in CHEAP:
                with self.subTest(graph=name):
                    with open(os.path.join(d, name + ".json")) as f:
                        fresh = f.read()
                    with open(os.path.join(GRAPHS, name + ".json")) as f:
                        committed = f.read()
                    self.assertEqual(fresh, committed, "graphs/%s.json is stale: run graphs/generate.sh" % name)


if __name__ == "__main__":
    unittest.main()
