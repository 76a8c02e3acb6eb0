# The trained methods the benchmarks compare, each as `roformer train --set` overrides of the
# quickstart model (configs/quickstart/base.yaml, RoPE): sourced by bench_eval_methods.sh and
# bench_train_methods.sh, so a method is spelled once.
#   trained_methods     the methods train_args knows (RoPE's other names fall back to it)
#   train_args METHOD   its --set arguments, echoed for word splitting; METHOD@KERNEL (auto, fused
#                       or reference) adds --set model.attention_kernel=KERNEL
trained_methods="rope fox fox-rope stick_breaking ssmax alibi t5_bias kerple sandwich shaw transformer_xl deberta fire cope irope rnope_swa drope path path_fox"

train_args() {
  if [[ "$1" == *@* ]]; then
    train_args "${1%@*}"
    echo "--set model.attention_kernel=${1#*@}"
    return
  fi
  case "$1" in
    fox) echo "--set model.position.kind=fox" ;;
    fox-rope) echo "--set model.position.kind=fox --set model.position.fox.rope=true" ;;
    stick_breaking) echo "--set model.attention_normalizer=stick_breaking" ;;
    ssmax) echo "--set model.position.kind=none --set model.attention_scale=ssmax" ;;
    alibi|t5_bias|kerple|sandwich|shaw|transformer_xl|deberta|fire|cope) echo "--set model.position.kind=$1" ;;
    irope) echo "--set model.position.kind=rope --set model.layout.preset=custom --set model.layout.pattern=LG --set model.layout.local.window_kind=chunked --set model.layout.local.qk_norm=on --set model.layout.global.position=none --set model.layout.global.temperature=llama4 --set model.attention_scale_floor=128" ;;
    rnope_swa) echo "--set model.position.kind=rope --set model.layout.preset=custom --set model.layout.pattern=LG --set model.layout.global.position=none" ;;
    drope) echo "--set model.position.kind=none" ;;
    path) echo "--set model.position.kind=path" ;;
    path_fox) echo "--set model.position.kind=path --set model.position.path.forget_gate=true" ;;
    *) echo "--set model.position.kind=rope" ;;
  esac
}
