"""A variational autoencoder (Kingma and Welling, 2013) with MLP encoder and decoder.

The layout and names are those of PyTorch's ``examples/vae`` (``fc1``; ``fc21`` and
``fc22`` for the mean and log-variance; ``fc3`` and ``fc4`` for the decoder), with the
sizes as arguments so the same model fits 8x8 digits or 28x28 MNIST.
"""
import lezero as lz
import lezero.functions as F
from lezero import cuda, nn


class VAE(nn.Module):
    """Encoder x -> (mu, logvar) of a diagonal Gaussian q(z|x); decoder z -> Bernoulli
    logits of p(x|z).  ``forward(x)`` returns ``(recon_logits, mu, logvar)``; inputs of
    any shape (N, ...) are flattened to (N, in_features)."""

    def __init__(self, in_features=784, hidden=400, latent=20):
        super().__init__()
        self.in_features, self.latent = in_features, latent
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc21 = nn.Linear(hidden, latent)
        self.fc22 = nn.Linear(hidden, latent)
        self.fc3 = nn.Linear(latent, hidden)
        self.fc4 = nn.Linear(hidden, in_features)

    def encode(self, x):
        """(mu, logvar) of q(z|x)."""
        h = F.relu(self.fc1(F.reshape(x, (x.shape[0], self.in_features))))
        return self.fc21(h), self.fc22(h)

    def reparameterize(self, mu, logvar):
        """z = mu + sigma * eps with eps ~ N(0, I) from LeZero's generator: the sample is
        a differentiable function of mu and logvar.  In eval mode z = mu."""
        if not self.training:
            return mu
        xp = cuda.get_array_module(mu.data)
        eps = lz.get_rng(xp).standard_normal(mu.shape).astype(mu.dtype)
        return mu + eps * F.exp(0.5 * logvar)

    def decode_logits(self, z):
        """Bernoulli logits of p(x|z), shape (N, in_features)."""
        return self.fc4(F.relu(self.fc3(z)))

    def decode(self, z):
        """Pixel means sigmoid(logits): what a sample z looks like."""
        return F.sigmoid(self.decode_logits(z))

    def forward(self, x):
        mu, logvar = self.encode(x)
        return self.decode_logits(self.reparameterize(mu, logvar)), mu, logvar


def vae_loss(recon_logits, x, mu, logvar):
    """The negative ELBO summed over the batch: Bernoulli reconstruction cross entropy
    (from logits, stable) plus KL(q(z|x) || N(0, I)) in closed form.  Divide by the batch
    size for a per-sample value."""
    x = x.data if isinstance(x, lz.Variable) else x
    target = x.reshape(recon_logits.shape).astype(recon_logits.dtype)
    bce = F.binary_cross_entropy_with_logits(recon_logits, target, reduction="sum")
    kld = -0.5 * F.sum(1 + logvar - mu * mu - F.exp(logvar))
    return bce + kld
