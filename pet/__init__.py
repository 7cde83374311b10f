"""PET: partially-equivalent transformations with box verification, finite-field
tests, correction kernels and a beam-search optimizer, on the ``eqsat`` IR."""
