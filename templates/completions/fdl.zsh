#compdef fdl
# zsh completion for fdl. Load it with:  eval "$(fdl completions zsh)"  (after compinit)
# Candidates come from `fdl __complete`, which reads the manifest each time.
_fdl() {
    local -a lines candidates
    local line value desc
    lines=("${(@f)$(command fdl __complete zsh -- "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    if [[ "${lines[1]}" == ":files" ]]; then _files; return; fi
    if [[ "${lines[1]}" == ":dirs" ]]; then _files -/; return; fi
    for line in "${lines[@]}"; do
        [[ -z "$line" ]] && continue
        value="${line%%$'\t'*}"
        desc=""
        [[ "$line" == *$'\t'* ]] && desc="${line#*$'\t'}"
        candidates+=("${value//:/\\:}${desc:+:$desc}")
    done
    _describe -t fdl-commands 'fdl' candidates
}
compdef _fdl fdl
