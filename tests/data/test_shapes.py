"""Generated shapes: deterministic by seed, boxes that are the tight boxes of the visible
shape pixels in the masks, torchvision-style detection samples and mask samples."""
import numpy as np
import pytest

from lezero.data.datasets import (SHAPE_CLASSES, ShapesDetection, ShapesSegmentation,
                                  generate_shapes)


def test_generate_shapes_is_deterministic_and_well_formed():
    images, boxes, labels, masks = generate_shapes(30, size=32, max_objects=3, seed=5)
    again = generate_shapes(30, size=32, max_objects=3, seed=5)
    assert np.array_equal(images, again[0]) and np.array_equal(masks, again[3])
    assert not np.array_equal(images, generate_shapes(30, size=32, seed=6)[0])
    assert images.shape == (30, 3, 32, 32) and images.dtype == np.float32
    assert images.min() >= 0 and images.max() <= 1
    counts = [len(b) for b in boxes]
    assert min(counts) >= 1 and max(counts) <= 3
    assert set(np.concatenate(labels).tolist()) == {0, 1, 2}


def test_boxes_are_the_tight_boxes_of_the_masks():
    _, boxes, labels, masks = generate_shapes(40, size=48, max_objects=2, seed=1)
    for b, c, m in zip(boxes, labels, masks):
        for (x1, y1, x2, y2), k in zip(b, c):
            inside = m[int(y1):int(y2), int(x1):int(x2)]
            # the box holds pixels of its class touching each of its four edges
            assert (inside[0] == k + 1).any() and (inside[-1] == k + 1).any()
            assert (inside[:, 0] == k + 1).any() and (inside[:, -1] == k + 1).any()
        # no pixel of a class lies outside every box of that class (but a fragment of
        # under 4 pixels left of a covered shape, which gets no box)
        for k in range(3):
            ys, xs = np.nonzero(m == k + 1)
            covered = np.zeros(len(xs), dtype=bool)
            for (x1, y1, x2, y2), kk in zip(b, c):
                if kk == k:
                    covered |= (xs >= x1) & (xs < x2) & (ys >= y1) & (ys < y2)
            assert (~covered).sum() < 4


def test_datasets_return_torchvision_style_samples():
    det = ShapesDetection(n=6, size=32, train=False)
    image, target = det[2]
    assert image.shape == (3, 32, 32) and set(target) == {"boxes", "labels"}
    assert target["boxes"].shape == (len(target["labels"]), 4)
    assert det.classes == SHAPE_CLASSES
    seg = ShapesSegmentation(n=6, size=32, train=False)
    image2, mask = seg[2]
    assert np.array_equal(image, image2) and mask.shape == (32, 32)     # same scenes
    assert seg.classes[0] == "background" and mask.max() <= 3
    train = ShapesDetection(n=6, size=32, train=True)
    assert not np.array_equal(train[0][0], det[0][0])                    # new test images


def test_generate_shapes_rejects_bad_arguments():
    with pytest.raises(ValueError, match="generate_shapes: size must be >= 16"):
        generate_shapes(2, size=8)
    with pytest.raises(TypeError, match="generate_shapes: n must be an int"):
        generate_shapes(2.0)
