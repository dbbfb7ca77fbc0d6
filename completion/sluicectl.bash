# bash completion for sluicectl(8): global options, commands and their words, rules files,
# network interfaces, and the names of the rules of the running backend (read with
# `sluicectl [--socket SOCK | --xdp IFACE] rule list`, so `rule show <TAB>` offers what runs).

# _sluicectl_rule_names: the rule names the backend named on the command line reports
# (nothing when none answers within 2 s); the header row and the default row are not rules.
_sluicectl_rule_names() {
  local -a backend=()
  local i
  for ((i = 1; i < cword - 1; i++)); do
    case ${words[i]} in
      --socket | --xdp) backend=("${words[i]}" "${words[i + 1]}") ;;
    esac
  done
  timeout 2 "${words[0]}" "${backend[@]}" rule list 2>/dev/null |
    awk 'NR > 1 && $1 != "default" { print $1 }'
}

_sluicectl_interfaces() {
  local ifaces
  ifaces=$(command ls /sys/class/net 2>/dev/null)
  mapfile -t COMPREPLY < <(compgen -W "$ifaces" -- "$cur")
}

_sluicectl() {
  local cur prev words cword
  _init_completion || return

  case $prev in
    --socket)
      _filedir
      return
      ;;
    --xdp)
      _sluicectl_interfaces
      return
      ;;
    --mode)
      mapfile -t COMPREPLY < <(compgen -W "native skb" -- "$cur")
      return
      ;;
    --watch | --count)
      return
      ;;
  esac

  # The words of the command so far, without the global options and their values.
  local -a cmd=()
  local i
  for ((i = 1; i < cword; i++)); do
    case ${words[i]} in
      --socket | --xdp) ((i++)) ;;
      -*) ;;
      *) cmd+=("${words[i]}") ;;
    esac
  done

  local candidates=
  case ${#cmd[@]} in
    0)
      if [[ $cur == -* ]]; then
        candidates="--socket --xdp --help"
      else
        candidates="stats rule config flows xdp"
      fi
      ;;
    1)
      case ${cmd[0]} in
        stats) candidates="--json --watch --count" ;;
        rule) candidates="list show add set del" ;;
        config) candidates="check load save diff" ;;
        flows) candidates="top" ;;
        xdp) candidates="attach detach" ;;
      esac
      ;;
    *)
      case ${cmd[0]} in
        stats) candidates="--json --watch --count" ;;
      esac
      if ((${#cmd[@]} == 2)); then
        case "${cmd[0]} ${cmd[1]}" in
          "rule show" | "rule set" | "rule del")
            candidates=$(_sluicectl_rule_names)
            ;;
          "config check" | "config load" | "config diff")
            _filedir '@(yaml|yml)'
            return
            ;;
          "config save")
            _filedir
            return
            ;;
          "xdp attach" | "xdp detach")
            _sluicectl_interfaces
            return
            ;;
        esac
      elif [[ ${cmd[0]} == xdp && ${cmd[1]} == attach ]]; then
        candidates="--mode"
      fi
      ;;
  esac
  mapfile -t COMPREPLY < <(compgen -W "$candidates" -- "$cur")
}
complete -F _sluicectl sluicectl
