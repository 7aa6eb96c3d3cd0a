"""A torchvision detection model's training step as one module (Note [Data-dependent sizes]).

torchvision's detection models (Faster/Mask/Keypoint R-CNN, RetinaNet, FCOS, SSD) take a list of
images and, in training mode, a list of target dicts, and return a dict of losses. ``DetectionStep``
wraps one so that it takes an image batch ``[B, 3, H, W]`` and returns the summed loss, as a
training loop's ``sum(model(images, targets).values())`` does, with fixed synthetic targets made in
``forward`` from the image size: two boxes per image (class 1), their masks for Mask R-CNN
and 17 keypoints each for Keypoint R-CNN. The exporter wraps ``torchvision:NAME`` detection models
in it; the oracle kit records the same module, so an exported graph and a recorded trace see the
same targets. The proposals the model keeps depend on the weights and the image values: the export
runs on CPU tensors (seed 0, as the kit does) and keeps the sizes of that run.
"""
import torch
import torch.nn as nn

# Two boxes per image, as fractions of (width, height, width, height), and their labels (class 1:
# Keypoint R-CNN has two classes, background and person).
BOXES = ((0.10, 0.10, 0.60, 0.70), (0.45, 0.35, 0.95, 0.90))
LABELS = (1, 1)
KEYPOINTS = 17  # torchvision's keypointrcnn_resnet50_fpn default (COCO person keypoints)


def is_detection(builder):
    """Whether a torchvision.models builder makes a detection model (torchvision.models.detection)."""
    return (getattr(builder, "__module__", "") or "").startswith("torchvision.models.detection")


class DetectionStep(nn.Module):
    """model(list(images), targets) in training mode, its losses summed."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.masks = getattr(getattr(model, "roi_heads", None), "mask_head", None) is not None
        self.keypoints = getattr(getattr(model, "roi_heads", None), "keypoint_head", None) is not None

    def targets(self, n, h, w, device):
        out = []
        for _ in range(n):
            boxes = torch.tensor([[b[0] * w, b[1] * h, b[2] * w, b[3] * h] for b in BOXES], device=device)
            t = {"boxes": boxes, "labels": torch.tensor(LABELS, dtype=torch.int64, device=device)}
            if self.masks:
                masks = torch.zeros((len(BOXES), h, w), dtype=torch.uint8, device=device)
                for i, b in enumerate(BOXES):
                    masks[i, int(b[1] * h):int(b[3] * h), int(b[0] * w):int(b[2] * w)] = 1
                t["masks"] = masks
            if self.keypoints:
                kp = [[[b[0] * w + (b[2] - b[0]) * w * (k + 1) / (KEYPOINTS + 1),
                        b[1] * h + (b[3] - b[1]) * h * (k + 1) / (KEYPOINTS + 1), 1.0] for k in range(KEYPOINTS)]
                      for b in BOXES]
                t["keypoints"] = torch.tensor(kp, device=device)
            out.append(t)
        return out

    def forward(self, images):
        n, h, w = images.shape[0], int(images.shape[-2]), int(images.shape[-1])
        losses = self.model(list(images.unbind(0)), self.targets(n, h, w, images.device))
        return sum(losses.values())


def build(builder):
    """A detection model from its torchvision builder (random weights, no backbone weights), wrapped."""
    try:
        model = builder(weights=None, weights_backbone=None)
    except TypeError:  # torchvision < 0.13
        model = builder(pretrained=False, pretrained_backbone=False)
    return DetectionStep(model)
