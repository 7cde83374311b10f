"""PET: partially-equivalent transformations on the ``eqsat`` IR: transformed programs
(:mod:`pet.programs`), box verification, finite-field tests and correction kernels
(:mod:`pet.verify`). The cost-driven beam-search optimizer is still to come."""
