"""A stand-in pretraining check for test_pretrain (loaded by "module:function" name)."""


def check(lm):
    return {"n_params": sum(p.numel() for p in lm.model.parameters())}
