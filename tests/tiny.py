"""Tiny real models for the tests: a byte-level BPE tokenizer trained in a second and small random models
of several attention families, saved with save_pretrained and loaded back by path like any hub model."""

from __future__ import annotations

from pathlib import Path

import torch

CORPUS = [
    "The KV cache keeps every layer's keys and values so decode does not recompute history.",
    "Prefill reads the whole prompt at once; decode produces one token at a time.",
    "Time to first token, time per output token and throughput measure different things.",
    "用三句话解释 LLM 推理中的 KV Cache。预填充一次读完整个提示，解码一次生成一个词元。",
    "缓存用显存换速度，显存随批量、序列长度和层数线性增长。",
] * 20

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

# Each family: the transformers model_type and the config fields that give it its attention shape.
FAMILIES = {
    "qwen2": dict(model_type="qwen2", num_key_value_heads=2),  # grouped-query
    "llama": dict(model_type="llama", num_key_value_heads=4),  # plain multi-head
    "mistral": dict(model_type="mistral", num_key_value_heads=2, sliding_window=8),  # every layer slides
    "gemma2": dict(model_type="gemma2", num_key_value_heads=2, head_dim=32, sliding_window=8,
                   num_hidden_layers=4, query_pre_attn_scalar=32),  # alternating windows, explicit head_dim
    "deepseek_v3": dict(model_type="deepseek_v3", num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=None,
                        qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=4,
                        num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=32,
                        first_k_dense_replace=1, n_group=1, topk_group=1),  # latent attention
}


def train_tokenizer(folder: Path):
    """A byte-level BPE tokenizer (400 tokens) with EOS and a chat template, saved in HF format."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")  # noqa: S106
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    return fast


def build_model(folder: Path, family: str, tokenizer, max_position_embeddings: int = 256, seed: int = 0) -> Path:
    """Save a random model of `family` with `tokenizer` into `folder` and return the folder."""
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = dict(FAMILIES[family])
    model_type = fields.pop("model_type")
    base = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=max_position_embeddings,
                eos_token_id=tokenizer.eos_token_id, bos_token_id=None, pad_token_id=None,
                tie_word_embeddings=True)
    config = AutoConfig.for_model(model_type, **(base | fields))
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
