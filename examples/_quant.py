"""What the quantization examples share: train a float model, then post-training
quantization (calibrate, convert) and quantization-aware training (fine-tune with fake
quantization, convert), with accuracies, sizes and the summary file."""
import copy
import os
import time

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero import quantization as Q

from _common import SMOKE_BATCHES, accuracy, bar, batches, mean, write_json, write_summary


def add_quant_flags(p, qat_epochs):
    p.prog = p.prog.replace("train_quantize_", "quantize_")   # make_parser names train_*
    p.add_argument("--qat-epochs", type=int, default=qat_epochs,
                   help="epochs of quantization-aware fine-tuning")
    p.add_argument("--calib-batches", type=int, default=8,
                   help="batches of training data the observers see")
    p.add_argument("--observer", choices=("minmax", "histogram"), default="minmax",
                   help="activation observer of the post-training quantization")
    return p


def train(model, data, args, epochs, lr, desc, on_epoch=None):
    """Adam with cosine decay over ``epochs`` on ``data`` = (x, t), with a progress bar;
    returns the mean loss of the last epoch."""
    x, t = data
    steps = -(-len(x) // args.batch_size)
    if args.smoke:
        steps = min(steps, SMOKE_BATCHES)
    opt = optim.Adam(model.parameters(), lr=lr)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, epochs * steps))
    progress = bar(total=epochs * steps, desc=desc, unit="step", leave=False)
    losses = []
    for epoch in range(epochs):
        if on_epoch is not None:
            on_epoch(epoch, model)
        model.train()
        losses = []
        for xb, tb in batches((x, t), args.batch_size, args.seed, epoch):
            loss = F.cross_entropy(model(xb), tb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
            progress.update(1)
            progress.set_postfix(loss=f"{losses[-1]:.3f}")
    progress.close()
    return mean(losses)


def quantize_and_report(args, model, quantizable, train_data, test, name, data_name):
    """PTQ and QAT of a trained float ``model``; ``quantizable(m)`` returns the model with
    its QuantStub/DeQuantStub (a wrapper or the zoo adapter).  Prints the table, writes
    OUT/summary.json and OUT/results.json; returns the results."""
    t0 = time.perf_counter()
    if args.smoke:
        args.qat_epochs = 1
    x, _ = train_data
    float_acc = accuracy(model, *test, args)
    base = quantizable(copy.deepcopy(model)).eval()
    qconfig = Q.default_qconfig if args.observer == "minmax" else Q.histogram_qconfig
    prepared = Q.prepare(Q.fuse(base), qconfig=qconfig)
    n_calib = 1 if args.smoke else args.calib_batches
    Q.calibrate(prepared, (xb for xb, in batches((x,), args.batch_size, args.seed, 0)),
                max_batches=n_calib)
    ptq = Q.convert(prepared)
    ptq_acc = accuracy(ptq, *test, args)

    qat = Q.prepare_qat(Q.fuse(quantizable(copy.deepcopy(model)).train(), qat=True))
    half = max(1, args.qat_epochs // 2)

    def freeze_late(epoch, m):                 # the usual recipe: last epochs, BN frozen
        if epoch >= half:
            Q.freeze_bn_stats(m)
    train(qat, train_data, args, args.qat_epochs, args.lr * 0.1, "QAT", freeze_late)
    int8 = Q.convert(Q.disable_observer(qat.eval()))
    qat_acc = accuracy(int8, *test, args)
    sizes = {"float32": Q.model_size(model), "int8": Q.model_size(int8)}
    results = {"float_acc": float_acc, "ptq_acc": ptq_acc, "qat_acc": qat_acc,
               "float_bytes": sizes["float32"], "int8_bytes": sizes["int8"],
               "size_ratio": sizes["int8"] / sizes["float32"]}
    print(f"{name} on {data_name}: test accuracy float32 {float_acc * 100:.2f}%, "
          f"PTQ int8 {ptq_acc * 100:.2f}%, QAT int8 {qat_acc * 100:.2f}%")
    print(f"size: float32 {sizes['float32'] / 1024:.1f} KiB, int8 {sizes['int8'] / 1024:.1f}"
          f" KiB ({results['size_ratio']:.3f}x)")
    os.makedirs(args.out, exist_ok=True)
    lz.save(int8.state_dict(), os.path.join(args.out, "int8.npz"))
    write_json(os.path.join(args.out, "results.json"), results)
    write_summary(args, name, "int8 classification", data_name, "int8_qat_test_acc", qat_acc,
                  time.perf_counter() - t0, **results)
    return results
